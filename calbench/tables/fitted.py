"""What each cell's calibrator learned (``calbench tables --fitted``): per data set and
method, the chosen grid point and the small fitted parameters the cell stored
(`calbench.calibrators.base.Calibrator.learned`: TS's temperature, VS's vectors, ODIR's
resolved strengths, L-BFGS steps), written as ``tables/EXPERIMENT_fitted.md``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.markup import markdown_table, md_text
from calbench.results.experiment import Results

#: The entries of a learned vector or matrix a table prints before "...".
SHOWN_ENTRIES = 4


def fitted_text(fitted, shown: int = SHOWN_ENTRIES) -> str:
    """A stored ``fitted`` value (JSON: a dict, or a list of dicts for several members) in
    one line: scalars to 4 significant digits, vectors by their first entries and length."""
    value = json.loads(fitted) if isinstance(fitted, str) else fitted
    if isinstance(value, list):
        return " | ".join(fitted_text(member, shown) for member in value)
    if not value:
        return "-"
    return "; ".join(f"{name} = {_number_text(v, shown)}" for name, v in value.items())


def _number_text(value, shown: int) -> str:
    if isinstance(value, list):
        flat = (
            pd.Series(value).explode().tolist() if value and isinstance(value[0], list) else value
        )
        head = ", ".join(_number_text(v, shown) for v in flat[:shown])
        more = f", ... ({len(flat)})" if len(flat) > shown else ""
        return f"[{head}{more}]"
    if isinstance(value, bool | int):
        return str(value)
    return f"{value:.4g}"


def fitted_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell (data set x method x criterion), first fold: chosen point and learned
    parameters."""
    first = rows.sort_values("fold").drop_duplicates("config_hash")
    fitted = first["fitted"] if "fitted" in first else pd.Series("{}", index=first.index)
    return pd.DataFrame(
        {
            "dataset": first["dataset"],
            "method": first["method"],
            "criterion": first["criterion"],
            "chosen": first["params"].map(lambda p: fitted_text(p, SHOWN_ENTRIES)),
            "fitted (first fold)": fitted.map(fitted_text),
        }
    ).sort_values(["dataset", "method", "criterion"])


def write_fitted(results_dir, experiment: str) -> Path:
    rows = Results.of(results_dir).experiment_rows(experiment)
    table = fitted_table(rows)
    text = (
        f"**What was fitted in {md_text(experiment)}: each cell's chosen grid point and, "
        "where small, its learned parameters (first fold; vectors by their first entries and "
        "length).**"
        "\n\n" + markdown_table(table, index=False) + "\n"
    )
    path = Path(results_dir) / "tables" / f"{experiment}_fitted.md"
    atomic_write_text(path, text)
    return path
