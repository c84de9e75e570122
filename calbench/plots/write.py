"""``calbench figures``: the papers' figures for an experiment, as PNG and PDF, from the store.

Nothing is refitted: every figure reads the cells' rows or their stored predictions.

- Per task (a data set, or a data set x classifier; every task, or the first
  ``--max-tasks``): on 3-class data Valk Fig. 5-style simplex maps, one panel per method
  plus the calibration data and the true map; confidence and class-1 reliability diagrams
  in the bins of the tables' confidence_ece (each panel's ECE with its bootstrap interval:
  the confidence's is the tables' number), smoothed reliability diagrams and KS calibration
  graphs (Gupta Fig. 1 a-b, their ks_error the tables') of the leaderboard's top three
  methods on log-loss, TS and uncalibrated, the same on every task (`--methods` names any
  number; `--ci`: each reliability bar's bootstrap interval).
- Experiments with several data sets: from 5 tasks, a critical-difference diagram per
  metric (p-cw-ECE's too where it was recorded: Kull Fig. 3a) and, for the calibration
  tests' acceptance
  shares, Kull Fig. 3b (per calibrator) and 3c (per classifier, uncalibrated).
- Hoki Fig. 3's log ECE vs variance scatter, where both were recorded.
"""

from __future__ import annotations

from pathlib import Path

from calbench.plots.output import save_figure  # first: the headless backend  # isort: skip

import matplotlib.pyplot as plt

from calbench.conf_files import read_group, swept_values
from calbench.errors import CalbenchError
from calbench.metrics import higher_is_better
from calbench.plots.acceptance import acceptance_boxes, acceptance_shares
from calbench.plots.cd_diagram import cd_figure
from calbench.plots.ks import ece_variance_scatter
from calbench.plots.leaderboard import MIN_CD_TASKS
from calbench.plots.predictions import stored_tasks, task_figures
from calbench.results.experiment import Results


def swept_methods(experiment: str) -> list[str]:
    """A preset's swept methods, in its order (the order of its figures' panels)."""
    return swept_values(read_group("experiment").get(experiment) or {}, "method")


def cd_figures(
    experiment: str, results_dir, metrics, out_dir: Path, formats, rows=None
) -> list[Path]:
    rows = Results.of(results_dir).experiment_rows(experiment) if rows is None else rows
    paths = []
    for metric in metrics:
        table = (
            rows[rows["metric"] == metric]
            .groupby(["dataset", "classifier", "method"])["value"]  # a task per model
            .mean()
            .unstack("method")
            .dropna()  # a CD diagram ranks the tasks that every method has results on
        )
        if len(table) < MIN_CD_TASKS:  # as the leaderboard's (2 tasks: a test with no power)
            continue
        paths += cd_figure(
            table,
            higher_is_better(metric),
            f"{experiment}: {metric}",
            out_dir,
            f"{experiment}_cd_{metric}",
            formats,
        )
    return paths


def ece_variance_figure(experiment, results_dir, out_dir, formats, rows=None) -> list[Path]:
    """Hoki Fig. 3 from the store, where both metrics were recorded."""
    rows = Results.of(results_dir).rows(experiment) if rows is None else rows
    wanted = rows[rows["metric"].isin(["confidence_ece", "confidence_variance"])]
    if wanted["metric"].nunique() < 2:
        return []
    table = (
        wanted.groupby(["dataset", "method", "metric"])["value"]
        .mean()
        .unstack("metric")
        .dropna()
        .reset_index()
    )
    table = table[table["confidence_ece"] > 0]
    if table.empty:
        return []
    fig, ax = plt.subplots(figsize=(5, 4))
    ece_variance_scatter(ax, table)
    ax.set_title(f"{experiment}: log ECE vs variance (Hoki Fig. 3)", fontsize=9)
    return save_figure(fig, out_dir, f"{experiment}_ece_vs_variance", formats)


def acceptance_figures(experiment, rows, out_dir, formats) -> list[Path]:
    """Kull Fig. 3b (share of folds judged calibrated, per calibrator, across tasks) and 3c
    (per classifier, uncalibrated) for each stored ``p_*`` acceptance metric."""
    paths = []
    for metric in ("p_cw_ece", "p_conf_ece"):
        shares = acceptance_shares(rows, metric)
        if shares["dataset"].nunique() < 2:
            continue
        order = list(shares.groupby("method")["value"].mean().sort_values(ascending=False).index)
        fig, ax = plt.subplots(figsize=(1.0 + 0.7 * len(order), 3.6))
        acceptance_boxes(ax, shares, "method", f"{experiment}: {metric}, per calibrator", order)
        paths += save_figure(fig, out_dir, f"{experiment}_{metric}_per_method", formats)
        uncal = shares[shares["method"] == "uncal"]
        if uncal["classifier"].nunique() > 1:
            fig, ax = plt.subplots(figsize=(1.0 + 0.6 * uncal["classifier"].nunique(), 3.6))
            acceptance_boxes(ax, uncal, "classifier", f"{experiment}: {metric}, uncalibrated")
            paths += save_figure(
                fig, out_dir, f"{experiment}_{metric}_uncal_per_classifier", formats
            )
    return paths


#: The leaderboard's methods the per-task figures show by default, beside TS and uncal.
TOP_METHODS = 3


def leading_methods(rows, metric="log_loss", top=TOP_METHODS) -> list[str]:
    """The ``top`` methods by mean rank on ``metric`` over the tasks every method has a
    value on, then ``ts`` and ``uncal`` where stored: what per-task figures show by default,
    the same on every task."""
    from calbench.stats.ranks import task_ranks
    from calbench.tables.leaderboard import task_values

    try:
        values, _ = task_values(rows, metric)
    except CalbenchError:
        return []
    complete = values.dropna()
    if complete.empty:
        return []
    ranks = task_ranks(complete, higher_is_better(metric)).mean(axis=0).sort_values(kind="stable")
    leaders = [m.split("/")[0] for m in ranks.index[:top]]
    present = set(rows["method"])
    return list(dict.fromkeys([*leaders, *(m for m in ("ts", "uncal") if m in present)]))


def write_figures(
    experiment,
    results_dir="results",
    formats=("png", "pdf"),
    metrics=("log_loss", "classwise_ece"),
    methods=None,
    max_tasks=None,
    bands=None,
) -> list[Path]:
    """The experiment's figures under ``results_dir/figures``; ``bands``
    (`calbench.stats.bootstrap.BootstrapSettings`) puts bootstrap intervals on the
    reliability diagrams' bars."""
    out_dir = Path(results_dir) / "figures"
    store = Results.of(results_dir)
    stored = store.experiment_rows(experiment)
    if methods:
        unknown = sorted(set(methods) - set(stored["method"]))
        if unknown:  # before any work
            raise CalbenchError(
                f"--methods: {', '.join(unknown)} not stored for experiment {experiment!r}; "
                f"its methods: {', '.join(sorted(set(stored['method'])))}."
            )
    paths = []
    tasks, n_tasks = stored_tasks(
        store, stored, methods, order=methods or swept_methods(experiment), limit=max_tasks
    )
    if max_tasks is not None and n_tasks > max_tasks:
        print(f"per-task figures for the first {max_tasks} of {n_tasks} tasks (--max-tasks)")
    leaders = None if methods else leading_methods(stored)
    if leaders and len(set(stored["method"])) > len(leaders):
        print(
            f"per-task reliability figures: {', '.join(leaders)} (the leaderboard's top "
            f"{TOP_METHODS} on log-loss, TS and uncal; --methods names others)"
        )
    paths += task_figures(store, experiment, tasks, out_dir, formats, bands, bool(methods), leaders)
    if stored["dataset"].nunique() > 1:
        # Kull Fig. 3a: the CD diagram of p-cw-ECE wherever that test was recorded.
        shown = list(metrics) + [m for m in ("p_cw_ece",) if m in set(stored["metric"])]
        paths += cd_figures(
            experiment, results_dir, dict.fromkeys(shown), out_dir, formats, rows=stored
        )
        paths += acceptance_figures(experiment, stored, out_dir, formats)
    paths += ece_variance_figure(experiment, results_dir, out_dir, formats, rows=stored)
    if not paths:
        raise CalbenchError(
            f"Nothing to draw for experiment {experiment!r}: its cells were stored without "
            "predictions (predictions=none, or by an earlier calbench; rerun them with "
            "force=true) and it has results on one data set only (CD diagrams need 2)."
        )
    return paths


def stored_experiments(results_dir) -> list[str]:
    experiments = sorted(Results.of(results_dir).rows()["experiment"].unique())
    if not experiments:
        raise CalbenchError(
            f"No results in {results_dir}: run `calbench run` (or a preset, e.g. "
            "`calbench run experiment=valk_synthetic`) first."
        )
    return experiments


def risk_curve_files(spec: dict, frame, results_dir: Path) -> list[Path]:
    """A risk-curve spec's figure (PNG and PDF) under ``results_dir/figures``, from the
    curves `calbench.tables.curves.curve_frame` computed."""
    from calbench.plots.curves import risk_curve_figure

    return save_figure(risk_curve_figure(spec, frame), Path(results_dir) / "figures", spec["name"])
