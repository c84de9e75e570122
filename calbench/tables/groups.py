"""Leaderboards by task property: does a ranking hold on small calibration sets, on many
classes, for each base-model family? (``calbench leaderboard E --by cal_size``).

A task's properties are the data set's calibration size, test size and number of classes,
and its classifier: from ``<results_dir>/tasks/<experiment>.csv`` where an import wrote one
(`calbench.results.importers`), else from the registered data sets' ``registry`` blocks
(a user's own file has none: its tasks fall in no group). A numeric property is cut into
thirds of its tasks (each value a group of its own where it takes three or fewer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calbench.errors import CalbenchError
from calbench.results.experiment import Results
from calbench.tables.leaderboard import Leaderboard, labelled, leaderboard

PROPERTIES = ("cal_size", "test_size", "n_classes", "classifier")


def tasks_file(results_dir, experiment: str) -> Path:
    return Path(results_dir) / "tasks" / f"{experiment}.csv"


def task_properties(results_dir, experiment: str, beside: str | None = None) -> pd.DataFrame:
    """Per task, labelled as the leaderboard labels it (`labelled`): its data set,
    classifier, sizes and classes (``beside``: an experiment on the same tasks whose import
    recorded them, for a run of CalArena's collection that records none)."""
    rows = Results.of(results_dir).experiment_rows(experiment)
    tasks = pd.DataFrame(
        {
            "task": labelled(rows)["dataset"],
            "dataset": rows["dataset"],
            "classifier": rows["classifier"],
        }
    ).drop_duplicates("task")
    path = tasks_file(results_dir, experiment)
    if not path.is_file() and beside:
        path = tasks_file(results_dir, beside)
    if path.is_file():
        sizes = pd.read_csv(path, dtype={"dataset": str, "classifier": str})
        tasks = tasks.merge(sizes, on=["dataset", "classifier"], how="left")
    else:
        from calbench.conf_files import read_group

        registry = {n: (c.get("registry") or {}) for n, c in read_group("dataset").items()}
        fields = {"cal_size": "n_cal", "test_size": "n_test", "n_classes": "classes"}
        for key, field in fields.items():
            tasks[key] = [registry.get(d, {}).get(field, np.nan) for d in tasks["dataset"]]
    return tasks.set_index("task")


def groups_of(properties: pd.DataFrame, by: str) -> dict[str, list[str]]:
    """Group label -> its tasks (see the module docstring)."""
    if by not in PROPERTIES:
        raise CalbenchError(f"--by {by!r}: a task property is one of {', '.join(PROPERTIES)}.")
    column = properties[by]
    if by == "classifier":
        return {str(v): list(column.index[column == v]) for v in sorted(column.dropna().unique())}
    values = pd.to_numeric(column, errors="coerce")
    known = values.dropna()
    if known.empty:
        raise CalbenchError(
            f"no task of this experiment records its {by} (a user's own files carry none)."
        )
    distinct = np.sort(known.unique())
    if len(distinct) <= 3:
        return {f"{by} = {v:g}": list(values.index[values == v]) for v in distinct}
    low, high = np.quantile(known, [1 / 3, 2 / 3])
    cuts = [
        (f"{by} <= {low:g}", values <= low),
        (f"{low:g} < {by} <= {high:g}", (values > low) & (values <= high)),
        (f"{by} > {high:g}", values > high),
    ]
    return {label: list(values.index[mask]) for label, mask in cuts if mask.any()}


def leaderboards_by(results_dir, experiment: str, metric: str, by: str, **options):
    """(group label, `Leaderboard`) of each group of tasks with a complete ranking."""
    properties = task_properties(results_dir, experiment, options.get("beside"))
    boards = []
    for label, tasks in groups_of(properties, by).items():
        try:
            board = leaderboard(results_dir, experiment, metric, tasks=tasks, **options)
        except CalbenchError:  # a group without two methods on a complete task: no ranking
            continue
        boards.append((label, board))
    return boards


def groups_markdown(boards: list[tuple[str, Leaderboard]], top: int = 4) -> str:
    """One line per group: its tasks and data sets, and its leaders with win rate,
    interval and 95% rank set."""
    lines = [
        "| tasks | count (data sets) | leaders: win rate [95% CI], rank set |",
        "|---|---|---|",
    ]
    for label, board in boards:
        t = board.table.head(top)
        leaders = "; ".join(
            f"{m} {r.win_rate:.3f} [{r.win_rate_low:.3f}, {r.win_rate_high:.3f}] "
            f"#{r.rank_best:.0f}" + ("" if r.rank_best == r.rank_worst else f"-{r.rank_worst:.0f}")
            for m, r in t.iterrows()
        )
        lines.append(f"| {label} | {len(board.values)} ({len(set(board.blocks))}) | {leaders} |")
    return "\n".join(lines) + "\n"
