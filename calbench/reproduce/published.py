"""The papers' published numbers as data: one CSV per paper table under each paper pack's
``published/`` (`calbench.packs`).

Each row is one printed number: ``paper, table, preset`` (the calbench experiment whose
cells reproduce it), ``dataset`` (calbench's name; ``average_rank`` or
``average_rank:GROUP`` for a printed average-rank row), ``column`` (the paper's column
label), ``method`` (calbench's method config), ``metric`` (the output name in the preset's
metrics config, which holds the paper-exact options), ``scale`` (the paper prints ``scale
x`` calbench's value: 100 for percentages and Valk's "x10^2"), ``value`` (as printed: its
digits are the printed rounding), ``rank`` (the printed rank, where the paper prints one)
and ``spec`` (for numbers that are themselves average ranks, as Kull's Tables 1-2: the
calbench table spec that computes them; the row is ``classifier:NAME`` or
``classifier:all``). CalArena's results (`calbench.papers.calarena2026.published_results`)
add its per-task columns and ``seconds``. A pack's ``not_reproducible.csv`` lists the tables
calbench cannot rerun, with the reason.
"""

from __future__ import annotations

import functools

import pandas as pd

from calbench.errors import CalbenchError
from calbench.packs import pack_files, paper_packs

#: The columns every published CSV holds (``rank`` and ``spec`` are optional).
COLUMNS = ["paper", "table", "preset", "dataset", "column", "method", "metric", "scale", "value"]


def _csv_files(name: str | None = None) -> list:
    """(pack, path) of every pack's published CSV (``name`` only, if given), by pack then
    file name."""
    return [
        (pack, path)
        for pack, folder in pack_files("published")
        for path in sorted(folder.iterdir())
        if path.suffix == ".csv" and (path.name == name if name else True)
    ]


def decimals_of(printed: str) -> int:
    """Digits after the decimal point of a printed number ("0.39" -> 2, "8" -> 0)."""
    return len(printed.split(".")[1]) if "." in printed else 0


def _all() -> pd.DataFrame:
    return _read_all(tuple(paper_packs()))  # cached per set of packs


def _read_csv(path) -> pd.DataFrame:
    """One published CSV, its `COLUMNS` checked: a missing one (a ``scale`` left out) would
    make every comparison of its numbers NaN without saying why."""
    frame = pd.read_csv(path, dtype={"value": str, "rank": str}, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise CalbenchError(
            f"{path}: the published numbers have no column {missing[0]!r}. A published CSV "
            f"needs the columns {', '.join(COLUMNS)} (scale: 1 where the paper prints "
            "calbench's value, 100 for percentages); add it to the file's header and rows."
        )
    return frame


@functools.cache
def _read_all(_packs: tuple) -> pd.DataFrame:
    frames = []
    for pack, path in _csv_files():
        if path.name != "not_reproducible.csv":
            frame = _read_csv(path)
            frame["source"] = path.name
            frame["pack"] = pack.name
            frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    # A benchmark's rows for networks calbench does not register (CalArena's) have no data
    # set: transcribed for their checksums, never compared.
    table = table[table["dataset"] != ""]
    # An empty value is a number the source left blank (CalArena's CDF-Spline log-losses:
    # NaN, its unclipped probabilities reaching above 1): nothing to compare.
    table = table[table["value"] != ""]
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
    frames = [pd.read_csv(p, keep_default_na=False) for _, p in _csv_files("not_reproducible.csv")]
    return pd.concat(frames, ignore_index=True)
