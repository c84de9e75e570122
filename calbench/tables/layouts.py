"""The papers' table layouts, built from the results store into a `RankedTable`.

- ``metrics_by_method`` (Valk Tables 1 and 4): one data set; metrics as rows, methods as
  columns, an average-rank row.
- ``datasets_by_method`` (Valk Tables 5-10): one metric; data sets as rows in groups
  (C-10, C-100), methods as columns, an average-rank row per group.
- ``mean_std`` (Ho Figs. 4.g-4.h): rows are (method, criterion) pairs, columns data sets
  (or metrics, e.g. a risk curve's points), cells "mean ± std" over the folds; the best
  mean per column bold.
- ``ranks_by_group`` (Kull Tables 1-2): one metric; methods ranked on every task (data set x
  classifier; ties share the mean rank, as the Friedman test assumes); rows are the average
  ranks per classifier, then over all tasks, with the Friedman p-value in the title.
- ``risk_curve`` (Ho Figs. 4.l-4.q): test risk against the unknown eps of a loss family or
  prior shift, as a CSV and a figure, and "mean ± std" at a few eps (`calbench.tables.curves`).

Values are the mean over folds. Rows of methods or data sets with no results are left out
and listed in ``RankedTable.missing``, never filled in; a row that lacks some method's
result is shown unranked and left out of the average ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calbench.errors import CalbenchError, check_choice
from calbench.stats.ranks import friedman, task_ranks
from calbench.tables.generic import task_rows
from calbench.tables.ranking import (
    AVERAGE_RANKS_NOTE,
    SHOWN_RANKS_NOTE,
    average_ranks,
    rank_row,
)


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
    show_ranks: bool = True  # False where the values are themselves ranks
    underline_second: bool = False  # Hoki's and Gupta's tables underline the runner-up
    column_decimals: list[int] | None = None  # per column, where they differ
    stds: np.ndarray | None = None  # shown as "mean ± std" where given (Ho's tables)
    #: Per value, where it came from, for its interval (`calbench.tables.intervals`):
    #: (metric, the stored cells' hashes, the scale it is shown at), None where it is no
    #: metric of stored predictions (an info column, fit seconds, a rank).
    sources: list[list[tuple | None]] | None = None
    #: Filled by `calbench.tables.intervals.add_intervals` (``calbench tables --ci``).
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    tied_with_best: np.ndarray | None = None  # paired interval of the difference holds 0
    interval_note: str = ""
    #: Values whose cells' predictions held wrong certainties, marked ‡, with the note
    #: that says so (`calbench.tables.certainties`).
    flagged: np.ndarray | None = None
    flag_note: str = ""
    #: Values whose cells' fits stopped before converging, marked §, with the note.
    unconverged: np.ndarray | None = None
    unconverged_note: str = ""

    @property
    def caption(self) -> str:
        """The title with the notes of its marks."""
        notes = (self.title, self.interval_note, self.flag_note, self.unconverged_note)
        return " ".join(t for t in notes if t)


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
    """Mean over folds as a (present rows x present columns) array, what is missing, and
    the stored cells behind each value (hashes, as a tuple)."""
    table = _mean_over_folds(rows, index)
    missing: list[str] = []
    columns = _present_columns(spec, set(table.columns), missing)
    shown = table.reindex(columns=list(columns)).dropna(how="all")  # rows with some result
    present = [r for r in row_keys if r in shown.index]
    missing += [f"{kind} {r}" for r in row_keys if r not in shown.index]
    values = shown.reindex(index=present).to_numpy(dtype=np.float64)
    if "config_hash" not in rows:  # rows not read from a store: no cells to resample
        return columns, present, values, missing, None
    # One pass over the distinct (row, method, cell) triples: a Python function per group
    # took 2 s of an arena-sized store's table (`benchmarks.bench_arena_store`).
    triples = rows[[index, "method", "config_hash"]].drop_duplicates()
    cells: dict[tuple, list[str]] = {}
    for r, m, h in zip(*(triples[c].tolist() for c in triples.columns), strict=True):
        cells.setdefault((r, m), []).append(h)
    hashes = [
        [tuple(sorted(cells[(r, m)])) if (r, m) in cells else None for m in columns]
        for r in present
    ]
    return columns, present, values, missing, hashes


def _sources(hashes, metrics, scales):
    """`RankedTable.sources` of a grid: row i's metric and scale, each value's cells."""
    if hashes is None:
        return None
    return [
        [None if h is None else (metrics[i], h, scales[i]) for h in row]
        for i, row in enumerate(hashes)
    ]


def metrics_by_method(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    rows = rows[rows["dataset"] == spec["dataset"]]
    columns, metrics, values, missing, hashes = _grid(spec, rows, "metric", spec["rows"], "metric")
    row_scale = spec.get("row_scale", {})  # e.g. ECE x 100 as in Valk Table 4
    scales = [float(row_scale.get(m, 1.0)) for m in metrics]
    values = values * np.array(scales)[:, None]
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
        sources=_sources(hashes, metrics, scales),
    )


def _info_columns(spec, rows, datasets):
    """Unranked columns before the methods, e.g. Hoki's validation and test accuracy:
    ``{label: {metric, method, scale, decimals}}``, fold means per data set."""
    labels, values, decimals = [], [], []
    for label, info in (spec.get("info_columns") or {}).items():
        chosen = rows[(rows["metric"] == info["metric"]) & (rows["method"] == info["method"])]
        means = chosen.groupby("dataset")["value"].mean().reindex(datasets)
        labels.append(label)
        values.append(means.to_numpy(dtype=np.float64) * float(info.get("scale", 1.0)))
        decimals.append(int(info.get("decimals", spec["decimals"])))
    return labels, np.array(values).T.reshape(len(datasets), len(labels)), decimals


def datasets_by_method(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    if spec.get("tasks") == "dataset_classifier":  # the generic layout's task labels
        rows = task_rows(rows)
    metric_rows = rows[rows["metric"] == spec["metric"]]
    if spec.get("value") == "fit_seconds":  # Hoki Table 3: the learning time of each cell
        metric_rows = metric_rows.assign(value=metric_rows["fit_seconds"])
        higher = False
    else:
        higher = direction(spec["metric"])
    columns, datasets, values, missing, hashes = _grid(
        spec, metric_rows, "dataset", spec["rows"], "dataset"
    )
    scale = float(spec.get("scale", 1.0))
    values = values * scale
    sources = None
    if spec.get("value") != "fit_seconds":  # seconds are no metric of the predictions
        n = len(datasets)
        sources = _sources(hashes, [spec["metric"]] * n, [scale] * n)
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
    info_labels, info_values, info_decimals = _info_columns(spec, rows, datasets)
    blank = np.full((len(datasets), len(info_labels)), np.nan)
    complete = pd.DataFrame(values, index=datasets, columns=list(columns)).dropna()
    title = _ranked_title(spec, ranks, datasets, complete, higher)
    return RankedTable(
        name=spec["name"],
        title=title,
        columns=info_labels + list(columns.values()),
        row_labels=labels,
        values=np.hstack([info_values, values]),
        ranks=np.hstack([blank, ranks]),
        average_rows=[
            (g, np.concatenate([np.full(len(info_labels), np.nan), a])) for g, a in averages
        ]
        if spec.get("average_rank", True)
        else [],
        decimals=spec["decimals"],
        missing=missing,
        show_ranks=spec.get("show_ranks", True),
        underline_second=spec.get("underline_second", False),
        column_decimals=info_decimals + [spec["decimals"]] * len(columns) if info_labels else None,
        sources=sources and [[None] * len(info_labels) + r for r in sources],
    )


def ranks_by_group(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    group = spec.get("group_by", "classifier")
    rows = rows[rows["metric"] == spec["metric"]]
    means = rows.groupby(["dataset", group, "method"])["value"].mean().unstack("method")
    missing: list[str] = []
    columns = _present_columns(spec, set(means.columns), missing)
    means = means.reindex(columns=list(columns))
    incomplete = means.isna().any(axis=1)
    missing += [f"some method on {d} / {g}" for d, g in means.index[incomplete]]
    means = means[~incomplete]  # a task is ranked only when every method has run on it
    if means.empty:
        raise CalbenchError(
            f"table {spec['name']}: no task has results for every method yet; "
            f"run `calbench run experiment={spec['experiment']}` first."
        )
    higher = direction(spec["metric"])
    ranks = task_ranks(means, higher)
    by_group = ranks.groupby(level=group).mean()
    labels = spec.get("rows") or {g: g for g in sorted(by_group.index)}
    order = [g for g in labels if g in by_group.index]
    missing += [f"{group} {g}" for g in labels if g not in by_group.index]
    values = np.vstack([by_group.loc[order].to_numpy(), ranks.mean().to_numpy()[None, :]])
    title = spec.get("title", spec["name"]) + " " + AVERAGE_RANKS_NOTE
    if len(means) >= 2 and len(columns) >= 3:
        test = friedman(means, higher)
        title += f" Friedman test over {test.n_tasks} tasks: p = {test.p_value:.3g}."
    return RankedTable(
        name=spec["name"],
        title=title,
        columns=list(columns.values()),
        row_labels=[("", labels[g]) for g in order] + [("", "avg rank")],
        values=values,
        ranks=np.vstack([rank_row(v, False, spec["decimals"]) for v in values]),
        average_rows=[],
        decimals=spec["decimals"],
        missing=missing,
        show_ranks=False,
    )


def mean_std(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    # Columns are data sets for one metric, or (``columns_by: metric``) several metrics of
    # one data set, e.g. a risk curve's points, or (``columns_by: shift``) one metric under
    # several prior shifts, e.g. the test prior known, estimated or ignored.
    by = spec.get("columns_by", "dataset")
    check_choice(by, "columns_by", f"table {spec['name']}", ("dataset", "metric", "shift"))
    if by == "metric":
        rows = rows[rows["metric"].isin(list(spec["columns"]))]
        metric = next(iter(spec["columns"]))
    else:
        metric = spec["metric"]
        rows = rows[rows["metric"] == metric]
    # A calibrator without a criterion (uncal) swept with several criteria stored equal
    # cells before the store merged them; each fold counts once.
    if "written" in rows:  # where cells repeat a value, the newest gives it
        rows = rows.sort_values("written", ascending=False, kind="stable")
    keys = ["dataset", "method", "criterion", "shift", "fold", "metric"]
    rows = rows.drop_duplicates([k for k in keys if k in rows])
    key = rows["method"] + "/" + rows["criterion"]
    grouped = rows.assign(key=key).groupby(["key", by])["value"]
    means, stds = grouped.mean().unstack(by), grouped.std(ddof=1).unstack(by)
    columns = {d: label for d, label in spec["columns"].items() if d in means.columns}
    missing = [f"{by} {d}" for d in spec["columns"] if d not in columns]
    if not columns:
        raise CalbenchError(
            f"table {spec['name']}: none of the {by}s {list(spec['columns'])} has results; "
            f"run `calbench run experiment={spec['experiment']}` first."
        )
    present = [k for k in spec["rows"] if k in means.index]
    missing += [f"method/criterion {k}" for k in spec["rows"] if k not in means.index]
    scale = float(spec.get("scale", 1.0))
    values = means.reindex(index=present, columns=list(columns)).to_numpy(float) * scale
    spread = stds.reindex(index=present, columns=list(columns)).to_numpy(float) * scale
    higher = direction(metric)
    ranks = np.column_stack([rank_row(v, higher, spec["decimals"]) for v in values.T])
    return RankedTable(
        name=spec["name"],
        title=spec.get("title", spec["name"]),
        columns=list(columns.values()),
        row_labels=[tuple(spec["rows"][k]) for k in present],
        values=values,
        ranks=ranks,
        average_rows=[],
        decimals=spec["decimals"],
        missing=missing,
        show_ranks=False,
        stds=spread,
    )


#: In what a layout reads (`calbench.tables.catalogue`): any value of that column serves.
ANY = "*"


def _info_metrics(spec) -> list[str]:
    return [spec["metric"], *(i["metric"] for i in (spec.get("info_columns") or {}).values())]


def mean_std_needs(spec) -> dict:
    pairs = [tuple(key.split("/")) for key in spec["rows"]]
    if spec.get("columns_by", "dataset") == "metric":
        return {"dataset": [ANY], "pairs": pairs, "metric": list(spec["columns"])}
    if spec.get("columns_by") == "shift":
        return {
            "dataset": [ANY],
            "pairs": pairs,
            "metric": [spec["metric"]],
            "shift": list(spec["columns"]),
        }
    return {"dataset": list(spec["columns"]), "pairs": pairs, "metric": [spec["metric"]]}


def metrics_by_method_needs(spec) -> dict:
    return {
        "dataset": [spec["dataset"]],
        "method": list(spec["columns"]),
        "metric": list(spec["rows"]),
    }


def _ranked_title(spec: dict, ranks, datasets, complete: pd.DataFrame, higher) -> str:
    """The caption: the spec's title, then how ranks are taken, which rows are left out
    of the average ranks (those without every method), and the Friedman test."""
    title = spec.get("title", spec["name"])
    if spec.get("show_ranks", True) and not np.isnan(ranks).all():
        title += " " + SHOWN_RANKS_NOTE
    partial = [d for d in datasets if d not in complete.index]
    ranked = spec.get("show_ranks", True) and not np.isnan(ranks).all()
    if partial and ranked and len(complete):
        shown = ", ".join(map(str, partial[:3])) + (" ..." if len(partial) > 3 else "")
        title += (
            f" Rows without every method ({shown}) are not ranked; the average ranks are "
            f"over the other {len(complete)}."
        )
    if spec.get("friedman") and len(complete) >= 2 and complete.shape[1] >= 3:
        test = friedman(complete, higher)
        title += f" Friedman test over {test.n_tasks} tasks: p = {test.p_value:.3g}."
    return title


def datasets_by_method_needs(spec) -> dict:
    return {
        "dataset": list(spec["rows"]),
        "method": list(spec["columns"]),
        "metric": _info_metrics(spec),
    }


def ranks_by_group_needs(spec) -> dict:
    """Tasks are any data sets under the classifiers the rows name."""
    return {
        "dataset": [ANY],
        "classifier": list(spec["rows"]),
        "method": list(spec["columns"]),
        "metric": [spec["metric"]],
    }
