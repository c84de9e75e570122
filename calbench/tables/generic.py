"""Tables for experiments without a paper layout (``default``, a user's own sweeps).

One table per recorded metric: a row per task (data set, or data set / classifier when
classifiers were swept), a column per method (``uncal`` first), the fold mean with its
rank in the row, the best bold, the average rank, and Friedman's p where there are at least
two complete tasks and three methods. `calbench figures` draws the matching CD diagrams.
"""

from __future__ import annotations

import pandas as pd

from calbench.decision.family import CURVE_METRIC
from calbench.metrics import higher_is_better, is_diagnostic

#: Recorded per cell but not a property of the method's predictions.
NOT_RANKED = ("fit_accuracy", "inner_classes_missing", "wrong_certainties", "fit_unconverged")


def task_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``dataset`` naming the task: ``data set / classifier`` where more than
    one classifier (or a real one) produced the scores."""
    classifiers = set(rows["classifier"]) - {"none"}
    if not classifiers:
        return rows
    return rows.assign(dataset=rows["dataset"] + " / " + rows["classifier"])


def generic_specs(experiment: str, rows: pd.DataFrame) -> list[dict]:
    """One ``datasets_by_method`` spec per metric of ``experiment``'s stored rows."""
    rows = task_rows(rows)
    methods = sorted(set(rows["method"]), key=lambda m: (m != "uncal", m))
    # Per metric, the tasks that recorded it (true-map errors exist on synthetic data only).
    tasks = rows.groupby("metric")["dataset"].agg(lambda d: sorted(set(d)))
    metrics = [
        m
        for m in dict.fromkeys(rows["metric"])
        if m not in NOT_RANKED and not m.startswith(CURVE_METRIC)
    ]
    # A sweep over seeds (or anything but the labels) stores several cells per task and
    # method, which one value averages: said in the caption, not left to be guessed.
    cells = rows.groupby(["dataset", "method"])["config_hash"].nunique()
    pooled = int(cells.max()) if len(cells) else 1
    return [_spec(experiment, metric, methods, tasks[metric], pooled) for metric in metrics]


def _spec(experiment: str, metric: str, methods, tasks: list[str], pooled: int = 1) -> dict:
    spec = {
        "name": f"{experiment}_{metric}",
        "experiment": experiment,
        "layout": "datasets_by_method",
        "metric": metric,
        "title": f"{metric} ({'higher' if higher_is_better(metric) else 'lower'} is better): "
        f"fold mean per task and method, experiment {experiment} "
        "(generic layout; rank within each row as subscript, best bold)."
        + (
            f" Up to {pooled} stored cells per task and method (a sweep's seeds or settings): "
            "each value is the mean of their folds."
            if pooled > 1
            else ""
        ),
        "columns": {m: m for m in methods},
        "rows": {t: ["", t] for t in tasks},
        "decimals": 4,
        "friedman": True,
        "tasks": "dataset_classifier",
    }
    if is_diagnostic(metric):  # shown, never ranked: no method is better for it
        spec["unranked"] = list(methods)
        spec["friedman"] = spec["average_rank"] = False
        spec["title"] = (
            f"{metric}: fold mean per task and method, experiment {experiment} (a "
            "diagnostic: it describes the predictions and is not ranked)."
        )
    return spec
