"""``calbench leaderboard EXPERIMENT[,EXPERIMENT...] [--metric M]``: which method wins across
the tasks of an experiment (networks, or UCI data set / classifier pairs), and how sure
that is.

Per method: the mean rank over tasks; the win rate (`calbench.stats.arena`) with a 95%
interval from the bootstrap over blocks of tasks (a block: the tasks of one data set); the
*clear* win rate, counting only wins the paired per-task test can tell from a tie (the
paired bootstrap of the two methods' difference on the task's test points, as ``calbench
tables --ci`` marks ties with the best); the Bradley-Terry strength (Elo scale) with its
interval; on how many tasks it is distinguishably better or worse than TS; the median fit
time over tasks. Written to ``results/leaderboards/EXPERIMENT_METRIC.md|tex|csv``; the
win-rate figure and the critical-difference diagram are `calbench.plots.leaderboard`'s.
Only tasks where every method has a value are ranked; the others are named.
``EXPERIMENT`` may list several, comma-separated (CalArena's collections): their tasks are
pooled over the methods every one of them ran (`pooled_rows`), and the caption adds
CalArena's own ranking across collections, the mean of the per-experiment win rates.
``--beside OTHER`` adds OTHER's methods on the same tasks as further competitors, named
``METHOD (published)`` for imported published results (`with_beside`): calbench's tuned
methods ranked beside CalArena's defaults-only numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.errors import CalbenchError
from calbench.metrics import higher_is_better, is_diagnostic
from calbench.results.experiment import Results
from calbench.stats import arena
from calbench.stats.bootstrap import BootstrapSettings
from calbench.stats.ranks import task_ranks
from calbench.tables.generic import task_rows
from calbench.tables.intervals import Replicates
from calbench.tables.leaderboard_text import (
    MIN_BLOCKS,  # noqa: F401
    REFERENCE,
    Leaderboard,
    caption,  # noqa: F401
    display_frame,  # noqa: F401
    few_blocks_caveat,  # noqa: F401
    improvement_lines,  # noqa: F401
    same_data_note,  # noqa: F401
    to_latex,  # noqa: F401
    to_markdown,  # noqa: F401
    write_leaderboard,  # noqa: F401
)


def labelled(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``dataset`` naming the task and ``method`` the competitor: a method
    fitted to several criteria competes once per criterion (``ts/nll``), and a sweep over
    losses or shifts makes a task of each (``set / shift=lt_k1``)."""
    rows = task_rows(rows)
    fitted = rows["criterion"] != "none"  # uncal fits nothing
    if rows.loc[fitted, "criterion"].nunique() > 1:
        named = rows["method"].where(~fitted, rows["method"] + "/" + rows["criterion"])
        rows = rows.assign(method=named)
    for column in ("loss", "shift"):
        if rows[column].nunique() > 1:
            rows = rows.assign(dataset=rows["dataset"] + f" / {column}=" + rows[column])
    return rows


def task_values(rows: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tasks x methods fold means, tasks x methods lists of cell hashes) of ``metric``."""
    picked = labelled(rows[rows["metric"] == metric])
    if picked.empty:
        known = sorted(set(rows["metric"]))
        raise CalbenchError(f"No stored values of metric {metric!r}; stored: {known}.")
    values = picked.groupby(["dataset", "method"])["value"].mean().unstack("method")
    cells = picked.groupby(["dataset", "method"])["config_hash"].agg(lambda h: sorted(set(h)))
    return values, cells.unstack("method")


def fit_seconds(rows: pd.DataFrame, tasks) -> pd.Series:
    """Median over ``tasks`` of each method's fit time (a cell's folds added up)."""
    cells = labelled(rows).drop_duplicates(["config_hash", "fold"])
    cells = cells[cells["dataset"].isin(tasks)]
    per_cell = cells.groupby(["config_hash", "dataset", "method"])["fit_seconds"].sum()
    return per_cell.groupby("method").median()


def block_of(task: str) -> str:
    """A task's block: its data set (``data set / classifier`` tasks share one)."""
    return task.split(" / ")[0]


def pooled_rows(results: Results, experiments: list[str]) -> pd.DataFrame:
    """The rows of several experiments as one, on the methods all of them ran; a task (data
    set and model) met in two experiments keeps both, its model named with its experiment.
    Blocks stay data sets, across experiments: one data set's tasks resampled together."""
    parts = [results.experiment_rows(e) for e in experiments]
    common = set.intersection(*(set(p["method"]) for p in parts))
    if len(common) < 2:
        raise CalbenchError(
            f"{', '.join(experiments)} share {len(common)} method(s) ({sorted(common)}); "
            "pooling ranks the methods every experiment ran, and needs 2."
        )
    seen: set[tuple] = set()
    for i, (experiment, part) in enumerate(zip(experiments, parts, strict=True)):
        pairs = set(zip(part["dataset"], part["classifier"], strict=True))
        if pairs & seen:
            parts[i] = part.assign(classifier=part["classifier"] + f" [{experiment}]")
        seen |= pairs
    rows = pd.concat(parts, ignore_index=True)
    return rows[rows["method"].isin(common)]


def per_experiment_win_rates(rows: pd.DataFrame, values: pd.DataFrame, better: bool):
    """CalArena's ranking across its collections: each method's win rate over one
    experiment's tasks of ``values`` (the pooled tasks x methods), averaged over the
    experiments."""
    labels = labelled(rows)
    rates = [
        arena.win_rates(arena.beats(values.loc[values.index.isin(tasks)].to_numpy(), better)).mean(
            axis=0
        )
        for _, tasks in labels.groupby("experiment")["dataset"]
    ]
    return pd.Series(np.mean(rates, axis=0), index=values.columns)


def with_beside(rows: pd.DataFrame, other: pd.DataFrame, other_name: str) -> pd.DataFrame:
    """``rows`` and, as further competitors, ``other``'s rows on the tasks ``rows`` has: each
    of its methods named ``METHOD (published)`` where ``other`` holds imported published
    results, else ``METHOD (OTHER)``. Both must name tasks alike (an HDF5 collection run with
    ``dataset.split_task`` names them ``data set / model``, as CalArena's results do)."""
    mine = set(task_rows(rows)["dataset"])
    theirs = task_rows(other)["dataset"]
    shared = theirs.isin(mine).to_numpy()
    if not shared.any():
        raise CalbenchError(
            f"{other_name} has none of the tasks of the leaderboard's experiment (e.g. "
            f"{sorted(mine)[:2]} against {sorted(set(theirs))[:2]}); --beside needs the same "
            "tasks, named alike."
        )
    for column in ("loss", "shift"):
        if rows[column].nunique() > 1:
            raise CalbenchError(
                f"--beside compares one {column}; the experiment sweeps "
                f"{sorted(set(rows[column]))}."
            )
    tag = "published" if (other["protocol"] == "published").all() else other_name
    other = other[shared].assign(
        method=lambda o: o["method"] + f" ({tag})",
        criterion="none",  # one name per method: the other run's criteria are not ours
        loss=rows["loss"].iloc[0],
        shift=rows["shift"].iloc[0],
    )
    return pd.concat([rows, other], ignore_index=True)


def _paired(store, rows, cells, methods, settings) -> np.ndarray:
    """(tasks, k, k): on each task, i and j differ by the paired bootstrap (the interval of
    their difference excludes 0)."""
    checksums = dict(zip(rows["config_hash"], rows["predictions_sha256"], strict=True))
    draws = Replicates(store, checksums, settings)
    alpha = settings.alpha
    out = np.zeros((len(cells), len(methods), len(methods)), dtype=bool)
    for t, (_, hashes) in enumerate(cells.iterrows()):
        replicates = np.stack(
            [draws.of((cells.attrs["metric"], hashes[m], 1.0))[1] for m in methods]
        )
        difference = replicates[:, None, :] - replicates[None, :, :]
        low, high = np.quantile(difference, [alpha / 2, 1 - alpha / 2], axis=2)
        out[t] = (low > 0) | (high < 0)
    return out


def _board_values(results_dir, experiment, metric, tasks, methods, beside):
    """The stored rows behind a leaderboard (pooled, with ``beside``) and their tasks x
    methods values and cells, ``tasks`` kept."""
    results = Results.of(results_dir)
    pooled = [e.strip() for e in experiment.split(",") if e.strip()]
    if beside and len(pooled) > 1:
        raise CalbenchError(
            "--beside sets one experiment's tasks beside another's; pool the experiments "
            "(A,B,C) or compare one of them, not both at once."
        )
    rows = pooled_rows(results, pooled) if len(pooled) > 1 else results.experiment_rows(experiment)
    experiment = "+".join(pooled)  # the pooled name its files take
    if beside:
        rows = with_beside(rows, results.experiment_rows(beside), beside)
        experiment = f"{experiment}+{beside}"
    values, cells = task_values(rows, metric)
    if tasks is not None:
        values = values.loc[values.index.isin(tasks)]
    if methods:
        unknown = sorted(set(methods) - set(values.columns))
        if unknown:
            raise CalbenchError(
                f"No stored {metric} of method(s) {unknown} in {experiment}; stored: "
                f"{sorted(values.columns)}."
            )
        values = values[list(methods)]
    complete = values.dropna()
    left_out = sorted(set(values.index) - set(complete.index))
    if len(complete) < 1 or complete.shape[1] < 2:
        raise CalbenchError(
            f"A leaderboard needs 2 methods on at least one task with values of every method; "
            f"{experiment} has {complete.shape[1]} methods and {len(complete)} complete tasks."
        )
    return results, rows, pooled, experiment, complete, left_out, cells


def _statistics(complete, wins, clear, blocks, methods, better, paired, settings):
    """One row per method: ranks, win rates and strengths, each with its bootstrap over
    blocks (the module docstring's columns)."""
    rng = np.random.default_rng(settings.seed)
    counts, index = arena.block_counts(blocks, settings.resamples, rng)
    q = [100 * settings.alpha / 2, 100 * (1 - settings.alpha / 2)]
    rate = arena.win_rates(wins)
    rate_draws = arena.bootstrap_means(rate, counts, index)
    rate_boot = np.percentile(rate_draws, q, axis=0)
    best_rank, worst_rank = arena.rank_sets(rate_draws, settings.alpha)
    mean_rate = rate.mean(axis=0)
    to_lead = arena.blocks_to_tell_apart(
        mean_rate, rate_draws, counts.shape[1], int(mean_rate.argmax()), settings.alpha
    )
    clear_rate = arena.win_rates(clear)
    clear_boot = np.percentile(arena.bootstrap_means(clear_rate, counts, index), q, axis=0)
    strength = arena.elo(arena.bradley_terry(arena.pairwise_wins(wins)))
    strength_boot = np.percentile(
        arena.elo(arena.bootstrap_strengths(wins, counts, index)), q, axis=0
    )
    table = pd.DataFrame(
        {
            "mean_rank": task_ranks(complete, better).mean(axis=0).to_numpy(),
            "win_rate": mean_rate,
            "win_rate_low": rate_boot[0],
            "win_rate_high": rate_boot[1],
            "rank_best": best_rank,
            "rank_worst": worst_rank,
            "blocks_to_tell_from_leader": to_lead,
            "clear_win_rate": clear_rate.mean(axis=0) if paired else np.nan,
            "clear_win_rate_low": clear_boot[0] if paired else np.nan,
            "clear_win_rate_high": clear_boot[1] if paired else np.nan,
            "strength": strength,
            "strength_low": strength_boot[0],
            "strength_high": strength_boot[1],
        },
        index=pd.Index(methods, name="method"),
    )
    return table


def _per_task(table, complete, rows, cells, methods, better, paired, clear, distinct):
    """Adds the reference's, fit-time and unconvergence columns to ``table`` (in place) and
    gives the per-task frame: the best method and its value, TS's and whether it differs."""
    ref = methods.index(REFERENCE) if REFERENCE in methods else None
    if ref is not None and paired:
        table["better_than_ts"] = clear[:, :, ref].sum(axis=0)
        table["worse_than_ts"] = clear[:, ref, :].sum(axis=0)
    table["median_fit_seconds"] = fit_seconds(rows, complete.index).reindex(methods).to_numpy()
    ranked = cells.loc[complete.index, methods]
    table["unconverged_tasks"] = flagged_tasks(rows, ranked, "fit_unconverged")
    table["refuted_tasks"] = flagged_tasks(rows, ranked, "wrong_certainties")
    best = complete.idxmax(axis=1) if better else complete.idxmin(axis=1)
    per_task = pd.DataFrame(
        {"best": best, "best_value": complete.max(axis=1) if better else complete.min(axis=1)}
    )
    if ref is not None:
        per_task["ts_value"] = complete[REFERENCE]
        if paired:
            per_task["ts_distinguishable"] = [
                bool(distinct[t, methods.index(b), ref]) for t, b in enumerate(best)
            ]
    return per_task


def leaderboard(
    results_dir,
    experiment: str,
    metric: str = "log_loss",
    settings: BootstrapSettings | None = None,
    paired: bool = True,
    methods: list[str] | None = None,
    tasks: list[str] | None = None,
    beside: str | None = None,
) -> Leaderboard:
    """The leaderboard of ``experiment`` on ``metric`` (``methods``: only these, e.g. to
    leave out a method that has not run on every task yet; ``tasks``: only these task
    labels, `calbench.tables.groups`; ``beside``: another experiment's methods on the same
    tasks as well, `with_beside`)."""
    settings = settings or BootstrapSettings()
    if is_diagnostic(metric):
        raise CalbenchError(
            f"{metric} is a diagnostic (it describes the predictions; no value of it is "
            "better than another), so no leaderboard ranks by it; `calbench tables` shows it."
        )
    results, rows, pooled, experiment, complete, left_out, cells = _board_values(
        results_dir, experiment, metric, tasks, methods, beside
    )
    methods = list(complete.columns)
    cells = cells.loc[complete.index, methods]
    cells.attrs["metric"] = metric
    better = higher_is_better(metric)
    ranked = {h for hashes in cells.to_numpy().ravel() for h in hashes}
    sums = rows.loc[rows["config_hash"].isin(ranked), "predictions_sha256"].fillna("")
    if paired and (sums == "").any():
        paired = False  # cells stored without predictions: no paired tests (the caption says)
    wins = arena.beats(complete.to_numpy(), better)
    distinct = _paired(results, rows, cells, methods, settings) if paired else None
    clear = wins & distinct if paired else wins

    blocks = [block_of(t) for t in complete.index]
    table = _statistics(complete, wins, clear, blocks, methods, better, paired, settings)
    per_task = _per_task(table, complete, rows, cells, methods, better, paired, clear, distinct)
    table = table.sort_values(["win_rate", "mean_rank"], ascending=[False, True])
    if len(pooled) > 1:
        mean = per_experiment_win_rates(rows, complete, better)
        table["mean_win_rate_over_experiments"] = mean.reindex(table.index)
    return Leaderboard(
        experiment,
        metric,
        better,
        table,
        complete,
        blocks,
        per_task,
        left_out,
        paired,
        settings,
        cells,
    )


def flagged_tasks(rows: pd.DataFrame, cells: pd.DataFrame, flag: str) -> np.ndarray:
    """Per method (``cells``' columns), the tasks on which a cell has stored row ``flag``
    above 0 in some fold: ``fit_unconverged`` (a fit stopped before converging),
    ``wrong_certainties`` (certainties the labels refuted), as the tables mark them."""
    short = set(rows.loc[(rows["metric"] == flag) & (rows["value"] > 0), "config_hash"])
    if not short:
        return np.zeros(cells.shape[1], dtype=int)
    hit = cells.map(lambda hashes: any(h in short for h in hashes))
    return hit.sum(axis=0).to_numpy()
