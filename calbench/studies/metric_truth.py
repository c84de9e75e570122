"""Which calibration number to trust: every calibration-error estimator of calbench measured
against the population value it estimates, on tasks whose true probabilities are known
(`calbench.studies.truth_tasks`).

For each task (classes x model) and calibrator, the calibrator is fitted once on a
calibration set; its population values come from a large sample of the task. Then test sets
of each size are drawn; on each, every calibrator's outputs are scored by every estimator
(the same test rows for every calibrator, so their orderings are paired), and for the sizes
up to `INTERVAL_MAX_SCORES` calbench's 95% bootstrap intervals (percentile and recentred) are
drawn for the estimators with a resampled form. `calbench.studies.metric_truth_report` turns
the rows into bias, standard deviation, RMSE, interval coverage and the share of calibrator
pairs ordered as the truth orders them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from calbench.calibrators.registry import registered_calibrator
from calbench.metrics import evaluate
from calbench.metrics.ece_interval import l2_ece_interval
from calbench.results.predictions import FoldPredictions
from calbench.simplex import softmax
from calbench.stats.bootstrap import bootstrap_cell, interval
from calbench.studies.truth_tasks import MODELS, TruthTask, population_errors

#: Estimator -> (metric options as a metric set holds them, the population value it estimates).
ESTIMATORS = {
    "ece_5_width": ({"fn": "confidence_ece", "n_bins": 5}, "tce"),
    "ece_15_width": ({"fn": "confidence_ece", "n_bins": 15}, "tce"),
    "ece_30_width": ({"fn": "confidence_ece", "n_bins": 30}, "tce"),
    "ece_15_mass": ({"fn": "confidence_ece", "n_bins": 15, "binning": "equal_size"}, "tce"),
    "ece_sweep": ({"fn": "confidence_ece_sweep"}, "tce"),
    "kde_ece": ({"fn": "kde_ece"}, "tce"),
    "ece2_15_width": ({"fn": "confidence_ece", "n_bins": 15, "alpha": 2}, "tce2"),
    "debiased_ece": ({"fn": "debiased_ece"}, "tce2"),
    # Sun et al. 2024's debiased squared L2-ECE (15 equal-width bins), its root here.
    "l2_ece_sun": ({"fn": "l2_ece_squared"}, "tce2"),
    "cw_ece_15_width": ({"fn": "classwise_ece", "n_bins": 15}, "cwce"),
    "cw_ece_15_mass": ({"fn": "classwise_ece", "n_bins": 15, "binning": "equal_size"}, "cwce"),
    "ks_error": ({"fn": "ks_error"}, "ks"),
    # Top-label, as the truth; the metric's own default scores class 1 of two (CalArena's).
    "kuiper_error": ({"fn": "kuiper_error", "mode": "top"}, "kuiper"),
    "smooth_ece": ({"fn": "smooth_ece"}, "smooth"),
}
#: Estimators whose bootstrap is drawn for all resamples at once (fast enough to draw on
#: every test set up to `INTERVAL_MAX_SCORES`).
WITH_INTERVALS = ("ece_15_width", "ece_15_mass", "cw_ece_15_width", "ks_error")
#: Intervals are drawn on test sets of at most this many scores (rows x classes): the
#: classwise bootstrap of 100 classes on 10,000 rows would take most of the study's time.
INTERVAL_MAX_SCORES = 100_000
#: calbench's bootstrap intervals, and Sun et al.'s (drawn for ``l2_ece_sun`` alone).
BOOTSTRAP_METHODS = ("percentile", "recentred")
INTERVAL_METHODS = (*BOOTSTRAP_METHODS, "sun")
#: The calibrators compared (method name -> calibrator and its parameters).
CALIBRATORS = {
    "uncal": ("uncal", {}),
    "ts": ("ts", {}),
    "isotonic": ("isotonic", {}),
    "histbin": ("histbin_width", {"n_bins": 15}),
}


@dataclass(frozen=True)
class StudySize:
    """How large the study is: classes, test sizes with their draws, the calibration and
    population sample sizes, bootstrap resamples."""

    classes: tuple = (2, 10, 100)
    draws: tuple = ((100, 30), (1_000, 30), (10_000, 8), (100_000, 2))
    calibration_rows: int = 5_000
    population_rows: int = 400_000
    resamples: int = 200


SIZES = {
    "default": StudySize(),
    "quick": StudySize(
        classes=(2, 10), draws=((100, 10), (1_000, 5)), population_rows=50_000, resamples=100
    ),
}


def run_study(size: StudySize, seed: int = 0, progress=None) -> pd.DataFrame:
    """One row per (task, calibrator, test size, draw, estimator): its estimate, the
    population value, and the intervals where drawn."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in size.classes:
        for model in MODELS:
            task = TruthTask(k, model)
            fitted, truths = _fit_calibrators(task, size, rng)
            for n, draws in size.draws:
                for draw in range(draws):
                    logits, q, y = task.draw(n, rng)
                    uncalibrated = softmax(logits)
                    for method, calibrator in fitted.items():
                        probs = calibrator.predict_proba(logits)
                        base = (task.n_classes, task.model, method, n, draw)
                        rows += _scored(base, probs, uncalibrated, y, truths[method], size)
                if progress:
                    progress(f"{task.name}: {draws} test sets of {n:,} rows")
    columns = ["classes", "model", "calibrator", "rows", "draw", "estimator", "estimate"]
    columns += ["truth", *[f"{m}_{e}" for m in INTERVAL_METHODS for e in ("low", "high")]]
    return pd.DataFrame(rows, columns=columns)


def _fit_calibrators(task: TruthTask, size: StudySize, rng):
    """Each calibrator fitted on one calibration set, and its population values."""
    logits, _, y = task.draw(size.calibration_rows, rng)
    population = task.draw(_population_rows(task, size), rng)
    fitted, truths = {}, {}
    for method, (name, params) in CALIBRATORS.items():
        fitted[method] = registered_calibrator(name, **params).fit(logits, y)
        outputs = fitted[method].predict_proba(population[0])
        truths[method] = population_errors(outputs, population[1])
    return fitted, truths


def _population_rows(task: TruthTask, size: StudySize) -> int:
    """The population sample, smaller for many classes (its k x M outputs held at once)."""
    return max(size.population_rows * 10 // max(task.n_classes, 10), 50_000)


def _scored(base, probs, uncalibrated, y, truths, size: StudySize) -> list:
    """The rows of one calibrator on one test set."""
    # Sun et al.'s estimate comes with its interval (below), not from a second evaluation.
    metrics = {name: options for name, (options, _) in ESTIMATORS.items() if name != "l2_ece_sun"}
    values = evaluate(metrics, probs, y=y)
    nan = [np.nan, np.nan]
    bounds = {name: {method: nan for method in INTERVAL_METHODS} for name in ESTIMATORS}
    if probs.size <= INTERVAL_MAX_SCORES:
        fold = FoldPredictions(0, y, probs, uncalibrated, loss=np.zeros(0))
        chosen = {name: metrics[name] for name in WITH_INTERVALS}
        boot = bootstrap_cell([fold], chosen, n_resamples=size.resamples, seed=base[-1])
        for name in WITH_INTERVALS:
            for method in BOOTSTRAP_METHODS:
                bounds[name][method] = list(
                    interval(boot.replicates[name], boot.estimate[name], method=method)
                )
    # Sun et al.'s interval is for the squared error: its ends' roots hold the root.
    sun = l2_ece_interval(probs, y, alpha=0.05)
    values["l2_ece_sun"] = np.sqrt(max(sun.estimate, 0.0))  # on the truth's scale
    bounds["l2_ece_sun"]["sun"] = [np.sqrt(max(sun.lower, 0.0)), np.sqrt(max(sun.upper, 0.0))]
    return [
        [*base, name, values[name], truths[estimand]]
        + [end for method in INTERVAL_METHODS for end in bounds[name][method]]
        for name, (_, estimand) in ESTIMATORS.items()
    ]
