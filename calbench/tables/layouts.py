"""The papers' table layouts, built from the results store into a `RankedTable`.

- ``metrics_by_method`` (Valk Tables 1 and 4): one data set; metrics as rows, methods as
  columns, an average-rank row.
- ``datasets_by_method`` (Valk Tables 5-10): one metric; data sets as rows in groups
  (C-10, C-100), methods as columns, an average-rank row per group.

Values are the mean over folds. Rows of methods or data sets with no results are left out
and listed in ``RankedTable.missing``, never filled in; a row that lacks some method's
result is shown unranked and left out of the average ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calbench.errors import CalbenchError
from calbench.tables.ranking import average_ranks, rank_row


@dataclass
class RankedTable:
    name: str
    title: str
    columns: list[str]  # column labels
    row_labels: list[tuple[str, str]]  # (group, label); group "" when ungrouped
    values: np.ndarray  # (rows, columns), NaN where absent
    ranks: np.ndarray  # (rows, columns), NaN where unranked
    average_rows: list[tuple[str, np.ndarray]]  # (group, mean rank per column)
    decimals: int
    missing: list[str] = field(default_factory=list)


def _mean_over_folds(rows: pd.DataFrame, index: str) -> pd.DataFrame:
    return rows.groupby([index, "method"])["value"].mean().unstack("method")


def _present_columns(spec, available, missing) -> dict:
    columns = {}
    for method, label in spec["columns"].items():
        if method in available:
            columns[method] = label
        else:
            missing.append(f"method {method}")
    if not columns:
        raise CalbenchError(
            f"table {spec['name']}: none of the methods {list(spec['columns'])} has results; "
            f"run `calbench run experiment={spec['experiment']}` first."
        )
    return columns


def _ranks(values, columns, unranked, directions, decimals):
    ranked = np.array([m not in unranked for m in columns])
    ranks = np.full(values.shape, np.nan)
    for i, higher in enumerate(directions):
        if np.isnan(values[i, ranked]).any():
            continue  # a row missing some method's result is shown but not ranked
        ranks[i] = rank_row(np.where(ranked, values[i], np.nan), higher, decimals)
    return ranks


def _grid(spec, rows, index: str, row_keys, kind: str):
    """Mean over folds as a (present rows x present columns) array, and what is missing."""
    table = _mean_over_folds(rows, index)
    missing: list[str] = []
    columns = _present_columns(spec, set(table.columns), missing)
    shown = table.reindex(columns=list(columns)).dropna(how="all")  # rows with some result
    present = [r for r in row_keys if r in shown.index]
    missing += [f"{kind} {r}" for r in row_keys if r not in shown.index]
    values = shown.reindex(index=present).to_numpy(dtype=np.float64)
    return columns, present, values, missing


def metrics_by_method(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    rows = rows[rows["dataset"] == spec["dataset"]]
    columns, metrics, values, missing = _grid(spec, rows, "metric", spec["rows"], "metric")
    row_scale = spec.get("row_scale", {})  # e.g. ECE x 100 as in Valk Table 4
    values = values * np.array([float(row_scale.get(m, 1.0)) for m in metrics])[:, None]
    ranks = _ranks(
        values,
        list(columns),
        set(spec.get("unranked", [])),
        [direction(m) for m in metrics],
        spec["decimals"],
    )
    return RankedTable(
        name=spec["name"],
        title=spec.get("title", spec["name"]),
        columns=list(columns.values()),
        row_labels=[("", spec["rows"][m]) for m in metrics],
        values=values,
        ranks=ranks,
        average_rows=[("", average_ranks(ranks))],
        decimals=spec["decimals"],
        missing=missing,
    )


def datasets_by_method(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    rows = rows[rows["metric"] == spec["metric"]]
    columns, datasets, values, missing = _grid(spec, rows, "dataset", spec["rows"], "dataset")
    values = values * float(spec.get("scale", 1.0))
    higher = direction(spec["metric"])
    ranks = _ranks(
        values,
        list(columns),
        set(spec.get("unranked", [])),
        [higher] * len(datasets),
        spec["decimals"],
    )
    labels = [tuple(spec["rows"][d]) for d in datasets]
    averages = []
    for group in dict.fromkeys(g for g, _ in labels):
        members = [i for i, (g, _) in enumerate(labels) if g == group]
        averages.append((group, average_ranks(ranks[members])))
    return RankedTable(
        name=spec["name"],
        title=spec.get("title", spec["name"]),
        columns=list(columns.values()),
        row_labels=labels,
        values=values,
        ranks=ranks,
        average_rows=averages,
        decimals=spec["decimals"],
        missing=missing,
    )


LAYOUTS = {"metrics_by_method": metrics_by_method, "datasets_by_method": datasets_by_method}


def build_table(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    if spec.get("layout") not in LAYOUTS:
        raise CalbenchError(
            f"table {spec['name']}: unknown layout {spec.get('layout')!r}; "
            f"known: {', '.join(LAYOUTS)}."
        )
    return LAYOUTS[spec["layout"]](spec, rows, direction)
