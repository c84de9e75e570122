"""``calbench figures``: the papers' figures for an experiment, as PNG and PDF.

- 3-class data sets (valk_synthetic): Valk Fig. 5-style simplex maps, one panel per method
  of the experiment's sweep plus the calibration data and the true map; confidence and
  class-1 reliability diagrams for a few methods. Methods are refitted as the experiment's
  config says (seeded, so the maps are the ones whose numbers are in the tables).
- Experiments with several data sets in the store: a critical-difference diagram per metric
  (p-cw-ECE's too where it was recorded: Kull Fig. 3a) and, for the calibration tests'
  acceptance shares, Kull Fig. 3b (per calibrator) and 3c (per classifier, uncalibrated).
- Any experiment with results: KS calibration graphs (Gupta Fig. 1 a-b) of the refitted
  methods on 3-class data, and Hoki Fig. 3's log ECE vs variance scatter from the store.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from calbench.plots.output import save_figure  # first: the headless backend  # isort: skip

import matplotlib.pyplot as plt
from hydra import compose, initialize_config_module
from matplotlib.backend_bases import FigureCanvasBase

from calbench.errors import CalbenchError
from calbench.plots.acceptance import acceptance_boxes, acceptance_shares
from calbench.plots.cd_diagram import cd_diagram
from calbench.plots.ks import ece_variance_scatter, ks_curves
from calbench.plots.reliability import reliability_diagram
from calbench.plots.simplex import calibration_data, calibration_map, colour_key
from calbench.runner.cell import (
    build_calibrator,
    fit_selected,
    load_configured_dataset,
)
from calbench.runner.checks import presets
from calbench.runner.store import ResultStore
from calbench.simplex import probs_to_logits
from calbench.tables.cli import metric_direction
from calbench.tables.statistics import friedman  # noqa: E402

RELIABILITY_METHODS = ("uncal", "ts", "dir", "kernel_dir_h01")


# Extra Hydra overrides for every composed config (``--override dataset.n_test=2000``).
_OVERRIDES: list[str] = []


def experiment_config(experiment: str, *overrides: str):
    with initialize_config_module("calbench.conf", version_base="1.3"):
        try:
            return compose(
                "config",
                overrides=[f"experiment={experiment}", *_OVERRIDES, *overrides],
                return_hydra_config=True,
            )
        except Exception as exc:  # Hydra's own message names the missing config
            raise CalbenchError(f"Cannot compose experiment={experiment}: {exc}") from None


def swept_methods(experiment: str) -> list[str]:
    params = experiment_config(experiment).hydra.sweeper.params or {}
    return [m.strip() for m in str(params.get("method", "")).split(",") if m.strip()]


def fitted_methods(experiment: str, methods: list[str]):
    """(dataset, {method: fitted model}) as the experiment configures them."""
    dataset, models = None, {}
    for method in methods:
        cfg = experiment_config(experiment, f"method={method}")
        dataset = dataset or load_configured_dataset(cfg)
        calibrator, grid, _ = build_calibrator(cfg, dataset)
        models[method], _ = fit_selected(cfg, calibrator, grid, dataset.logits_cal, dataset.y_cal)
    return dataset, models


def simplex_figures(experiment: str, out_dir: Path, formats, methods=None) -> list[Path]:
    methods = methods or swept_methods(experiment)
    dataset, models = fitted_methods(experiment, methods)
    if dataset.n_classes != 3:
        raise CalbenchError(
            f"Simplex maps need 3 classes; {dataset.name} has {dataset.n_classes}. "
            "Reliability diagrams and CD diagrams work for any number of classes."
        )
    panels = [m for m in methods if m not in ("uncal", "true_map")]
    n = len(panels) + 2
    cols = 4
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows))
    axes = axes.ravel()
    calibration_data(axes[0], dataset.probs_cal, dataset.y_cal, "(a) calibration data")
    if dataset.true_map is not None:
        calibration_map(axes[1], dataset.true_map, "(b) true calibration map")
    for i, method in enumerate(panels):
        model = models[method]
        calibration_map(
            axes[i + 2],
            lambda p, m=model: m.predict_proba(probs_to_logits(p)),
            f"({chr(ord('c') + i)}) {method}",
        )
    for ax in axes[n:]:
        ax.set_axis_off()
    if len(axes) > n:
        colour_key(axes[n])
    else:
        colour_key(fig.add_axes((0.92, 0.1, 0.12, 0.25)))
    paths = save_figure(fig, out_dir, f"{experiment}_simplex_maps", formats)

    shown = [m for m in RELIABILITY_METHODS if m in models]
    fig, axes = plt.subplots(2, len(shown), figsize=(3.0 * len(shown), 6.2), squeeze=False)
    for j, method in enumerate(shown):
        probs = models[method].predict_proba(dataset.logits_test)
        reliability_diagram(axes[0, j], probs, dataset.y_test, title=f"{method}: confidence")
        reliability_diagram(
            axes[1, j], probs, dataset.y_test, class_index=0, title=f"{method}: class 1"
        )
    fig.tight_layout()
    paths += save_figure(fig, out_dir, f"{experiment}_reliability", formats)

    fig, axes = plt.subplots(2, len(shown), figsize=(3.0 * len(shown), 6.0), squeeze=False)
    for j, method in enumerate(shown):
        probs = models[method].predict_proba(dataset.logits_test)
        ks_curves(axes[0, j], axes[1, j], probs, dataset.y_test, title=method)
    fig.tight_layout()
    return paths + save_figure(fig, out_dir, f"{experiment}_ks_curves", formats)


def cd_figures(
    experiment: str, results_dir, metrics, out_dir: Path, formats, rows=None
) -> list[Path]:
    rows = ResultStore(results_dir).read(experiment) if rows is None else rows
    if rows.empty:
        raise CalbenchError(
            f"No results for experiment {experiment!r} in {results_dir}; "
            f"run `calbench run experiment={experiment}` first."
        )
    direction = metric_direction()
    paths = []
    for metric in metrics:
        table = (
            rows[rows["metric"] == metric]
            .groupby(["dataset", "classifier", "method"])["value"]  # a task per model
            .mean()
            .unstack("method")
        )
        if len(table) < 2 or table.shape[1] < 3:
            continue  # one task or too few methods: no ranking statistics to draw
        result = friedman(table, direction(metric))
        fig, ax = plt.subplots(figsize=(7, 2.2 + 0.15 * table.shape[1]))
        cd_diagram(ax, result, title=f"{experiment}: {metric}")
        paths += save_figure(fig, out_dir, f"{experiment}_cd_{metric}", formats)
    return paths


def ece_variance_figure(experiment, results_dir, out_dir, formats, rows=None) -> list[Path]:
    """Hoki Fig. 3 from the store, where both metrics were recorded."""
    rows = ResultStore(results_dir).read(experiment) if rows is None else rows
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


def write_figures(
    experiment,
    results_dir="results",
    formats=("png", "pdf"),
    metrics=("log_loss", "classwise_ece"),
    methods=None,
) -> list[Path]:
    out_dir = Path(results_dir) / "figures"
    paths = []
    if experiment in presets():  # a user's own sweep (`default`) has no preset to refit
        cfg = experiment_config(experiment)
        swept = str((cfg.hydra.sweeper.params or {}).get("dataset", ""))
        # A sweep over data sets overrides the default (synthetic) one the preset composes
        # with; a preset that sweeps no methods has no maps to draw.
        if (
            not swept
            and cfg.dataset.loader == "synthetic_dirichlet"
            and (methods or swept_methods(experiment))
        ):
            paths += simplex_figures(experiment, out_dir, formats, methods)
    stored = ResultStore(results_dir).read(experiment)
    if stored["dataset"].nunique() > 1:
        # Kull Fig. 3a: the CD diagram of p-cw-ECE wherever that test was recorded.
        shown = list(metrics) + [m for m in ("p_cw_ece",) if m in set(stored["metric"])]
        paths += cd_figures(
            experiment, results_dir, dict.fromkeys(shown), out_dir, formats, rows=stored
        )
        paths += acceptance_figures(experiment, stored, out_dir, formats)
    if not stored.empty:
        paths += ece_variance_figure(experiment, results_dir, out_dir, formats, rows=stored)
    if not paths:
        raise CalbenchError(
            f"Nothing to draw for experiment {experiment!r}: simplex maps need the 3-class "
            "synthetic data, CD diagrams results on at least 2 data sets. Ho's risk-vs-eps "
            "curves are drawn by `calbench tables`."
        )
    return paths


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="calbench figures", description=__doc__)
    parser.add_argument("--experiment", default="valk_synthetic")
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--formats", default="png,pdf")
    parser.add_argument(
        "--metrics", default="log_loss,classwise_ece", help="metrics for CD diagrams"
    )
    parser.add_argument("--methods", help="comma-separated methods instead of the sweep's")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        help="a Hydra override for the refitted methods, e.g. dataset.n_test=2000",
    )
    args = parser.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    known = FigureCanvasBase.get_supported_filetypes()
    unknown = sorted(set(formats) - set(known))
    if unknown:  # before any refit, not after
        raise CalbenchError(
            f"Unknown figure format(s) {unknown}; matplotlib writes: {', '.join(sorted(known))}."
        )
    _OVERRIDES[:] = args.override
    paths = write_figures(
        args.experiment,
        args.results_dir,
        formats,
        [m for m in args.metrics.split(",") if m],
        [m for m in (args.methods or "").split(",") if m] or None,
    )
    for path in paths:
        print(f"wrote {path}")
