"""The papers' published numbers as data: one CSV per paper table under ``published/``.

Each row is one printed number: ``paper, table, preset`` (the calbench experiment whose
cells reproduce it), ``dataset`` (calbench's name; ``average_rank`` or
``average_rank:GROUP`` for a printed average-rank row), ``column`` (the paper's column
label), ``method`` (calbench's method config), ``metric`` (the output name in the preset's
metrics config, which holds the paper-exact options), ``scale`` (the paper prints
``scale x`` calbench's value: 100 for percentages and Valk's "x10^2"), ``value`` (as
printed: its digits are the printed rounding), ``rank`` (the printed rank, where the
paper prints one) and ``spec`` (for numbers that are themselves average ranks, as Kull's
Tables 1-2: the calbench table spec that computes them; the row is ``classifier:NAME`` or
``classifier:all``). CalArena's results (`calbench.reproduce.calarena`) add its per-task
columns and ``seconds``. ``not_reproducible.csv`` lists the tables calbench cannot rerun, with
the reason.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import pandas as pd

from calbench.errors import CalbenchError

COLUMNS = ["paper", "table", "preset", "dataset", "column", "method", "metric", "scale", "value"]


def _folder():
    return resources.files("calbench.reproduce").joinpath("published")


def decimals_of(printed: str) -> int:
    """Digits after the decimal point of a printed number ("0.39" -> 2, "8" -> 0)."""
    return len(printed.split(".")[1]) if "." in printed else 0


@lru_cache(maxsize=1)
def _all() -> pd.DataFrame:
    frames = []
    for entry in sorted(_folder().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".csv") and entry.name != "not_reproducible.csv":
            with entry.open() as f:
                frame = pd.read_csv(f, dtype={"value": str, "rank": str}, keep_default_na=False)
            frame["source"] = entry.name
            frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    # A benchmark's rows for networks calbench does not register (CalArena's) have no data
    # set: transcribed for their checksums, never compared.
    table = table[table["dataset"] != ""]
    table["spec"] = table["spec"].fillna("") if "spec" in table else ""
    table["decimals"] = table["value"].map(decimals_of)
    table["printed"] = table["value"].astype(float)
    table["rank"] = pd.to_numeric(table["rank"], errors="coerce")
    return table


def published(preset: str | None = None, *, averages: bool = False) -> pd.DataFrame:
    """The published numbers (of one preset); average-rank rows only if ``averages``."""
    table = _all()
    if not averages:
        table = table[~table["dataset"].str.startswith("average_rank")]
    if preset is not None:
        table = table[table["preset"] == preset]
        if table.empty:
            known = ", ".join(sorted(_all()["preset"].unique()))
            raise CalbenchError(
                f"No published numbers are recorded for preset {preset!r}; presets with "
                f"published numbers: {known}."
            )
    return table.reset_index(drop=True)


def presets() -> list[str]:
    return sorted(_all()["preset"].unique())


def not_reproducible() -> pd.DataFrame:
    with _folder().joinpath("not_reproducible.csv").open() as f:
        return pd.read_csv(f, keep_default_na=False)
