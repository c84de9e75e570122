"""Metrics as plain functions ``f(probs, y, **options) -> float`` and a registry by name.

``*_ece``, ``*_ce``, ``*_loss``, ``brier``, ``mce`` and risks: lower is better; ``accuracy``,
p-values and ``*_accepted``: higher is better. `METRICS` records, for each name, the
function, what it needs besides the calibrated probabilities, and its direction; tables
rank with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from calbench.errors import CalbenchError, unknown_name
from calbench.metrics import terms
from calbench.metrics.bayes_risk import (
    argmax_changed,
    average_loss_gap,
    empirical_risk,
    model_risk,
    risk_gap,
)
from calbench.metrics.binned import classwise_ece, confidence_ece, confidence_ece_sweep, mce
from calbench.metrics.consistency import (
    classwise_ece_accepted,
    classwise_ece_p_value,
    confidence_ece_accepted,
    confidence_ece_p_value,
)
from calbench.metrics.debiased import debiased_ece
from calbench.metrics.decomposition import (
    brier_reliability,
    brier_resolution,
    brier_uncertainty,
    brier_within_bins,
)
from calbench.metrics.ece_interval import l2_ece_interval, l2_ece_squared
from calbench.metrics.kde import kde_ece
from calbench.metrics.kernel_calibration import skce, skce_p_value
from calbench.metrics.ks import ks_error, kuiper_error
from calbench.metrics.lp_calibration import (
    lp_calibration_error,
    overconfidence_error,
    underconfidence_error,
)
from calbench.metrics.refinement import (
    calibration_brier,
    calibration_log_loss,
    refinement_brier,
    refinement_log_loss,
)
from calbench.metrics.resampled import (
    average_loss_gap_replicates,
    classwise_ece_replicates,
    confidence_ece_replicates,
    confidence_variance_replicates,
    ks_error_replicates,
    mce_replicates,
)
from calbench.metrics.scoring import accuracy, brier, confidence_variance, log_loss, top1_brier
from calbench.metrics.smooth import smooth_ece
from calbench.metrics.true_error import true_classwise_ce, true_confidence_ce
from calbench.packs import PackRegistry

#: The values a metric can take: (low, high), either end possibly infinite.
UNIT = (0.0, 1.0)
INF = float("inf")
DIRECTIONS = ("lower", "higher", "diagnostic")


@dataclass(frozen=True)
class MetricSpec:
    """One record per metric: its ``function``; its ``direction``: ``lower`` or ``higher``
    is better, or ``diagnostic`` (it describes the predictions without being better one way:
    the confidences' spread, the uncalibrated model's own risk, a term every method shares;
    tables show it and never rank it, and no leaderboard is made of it); its ``range``, the
    values it can take, ``(low, high)``; and what it ``needs`` besides the calibrated
    probabilities, one of
    ``labels`` (probs, y), ``true_probs`` (probs, true_probs; synthetic data only),
    ``labels_or_true`` (the exact version where the true map is known),
    ``reference`` (probs, uncalibrated probs), ``loss`` (probs, y, loss_matrix).
    """

    function: object
    direction: str = "lower"
    range: tuple = (0.0, INF)
    needs: str = "labels"
    #: Its value on every bootstrap resample of a fold at once, ``f(fold, indices,
    #: **options) -> (B,)`` or None where its options are not covered
    #: (`calbench.metrics.resampled`); None: no such form.
    resampled: object = None
    #: Its per-sample terms on a fold, ``f(fold, **options)`` (`calbench.metrics.terms`),
    #: where the metric is ``of_mean`` of their mean (None: the mean itself); None: it is no
    #: mean of per-sample terms.
    terms: object = None
    of_mean: object = None

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise CalbenchError(
                f"a metric's direction is one of {', '.join(DIRECTIONS)}, not {self.direction!r}"
            )

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"

    @property
    def diagnostic(self) -> bool:
        return self.direction == "diagnostic"


LIBRARY_METRICS = {
    "accuracy": MetricSpec(accuracy, "higher", UNIT, terms=terms.accuracy_fold),
    "log_loss": MetricSpec(log_loss, "lower", (0.0, INF), terms=terms.log_loss_fold),
    "brier": MetricSpec(brier, "lower", (0.0, 2.0), terms=terms.brier_fold),
    "top1_brier": MetricSpec(top1_brier, "lower", UNIT, terms=terms.top1_brier_fold),
    "kde_ece": MetricSpec(kde_ece, "lower", UNIT),
    "confidence_ece": MetricSpec(
        confidence_ece, "lower", UNIT, resampled=confidence_ece_replicates
    ),
    "confidence_ece_sweep": MetricSpec(confidence_ece_sweep, "lower", UNIT),
    "classwise_ece": MetricSpec(
        classwise_ece, "lower", (0.0, INF), resampled=classwise_ece_replicates
    ),
    "mce": MetricSpec(mce, "lower", UNIT, resampled=mce_replicates),
    "ks_error": MetricSpec(ks_error, "lower", UNIT, resampled=ks_error_replicates),
    "kuiper_error": MetricSpec(kuiper_error, "lower", (0.0, 2.0)),
    "smooth_ece": MetricSpec(smooth_ece, "lower", UNIT),
    # Kumar et al. 2019's debiased L2 calibration error.
    "debiased_ece": MetricSpec(debiased_ece, "lower", UNIT),
    # Sun et al. 2024's debiased squared L2-ECE, or an end of its confidence interval.
    "l2_ece_squared": MetricSpec(l2_ece_squared, "lower", (-2.0, 2.0)),
    # Widmann et al. 2019's kernel calibration error and its test (unbiased or linear).
    "skce": MetricSpec(skce, "lower", (-2.0, 2.0)),
    "skce_p_value": MetricSpec(skce_p_value, "higher", UNIT),
    # Berta et al.'s calibration-refinement split (calibration + refinement = the loss).
    "calibration_log_loss": MetricSpec(calibration_log_loss, "lower", (-INF, INF)),
    "refinement_log_loss": MetricSpec(refinement_log_loss, "lower", (0.0, INF)),
    "calibration_brier": MetricSpec(calibration_brier, "lower", (-2.0, 2.0)),
    "refinement_brier": MetricSpec(refinement_brier, "lower", (0.0, 2.0)),
    # Berta et al. 2026's variational Lp calibration error and its top-class split.
    "lp_calibration_error": MetricSpec(lp_calibration_error, "lower", (-2.0, 2.0)),
    "overconfidence_error": MetricSpec(overconfidence_error, "lower", (-1.0, 1.0)),
    "underconfidence_error": MetricSpec(underconfidence_error, "lower", (-1.0, 1.0)),
    # Murphy's decomposition of the Brier score, exact with Stephenson et al.'s within-bin term.
    "brier_reliability": MetricSpec(brier_reliability, "lower", (0.0, 2.0)),
    "brier_resolution": MetricSpec(brier_resolution, "higher", (0.0, 2.0)),
    "brier_uncertainty": MetricSpec(brier_uncertainty, "diagnostic", (0.0, 2.0)),
    "brier_within_bins": MetricSpec(brier_within_bins, "diagnostic", (-2.0, 2.0)),
    "confidence_variance": MetricSpec(
        confidence_variance, "diagnostic", (0.0, 0.25), resampled=confidence_variance_replicates
    ),
    "true_confidence_ce": MetricSpec(
        true_confidence_ce, "lower", UNIT, needs="true_probs", terms=terms.true_confidence_ce_fold
    ),
    "true_classwise_ce": MetricSpec(true_classwise_ce, "lower", (0.0, INF), needs="true_probs"),
    "average_loss_gap": MetricSpec(
        average_loss_gap,
        "lower",
        (-INF, INF),
        needs="labels_or_true",
        resampled=average_loss_gap_replicates,
    ),
    "empirical_risk": MetricSpec(
        empirical_risk, "lower", (-INF, INF), needs="loss", terms=terms.empirical_risk_fold
    ),
    "model_risk": MetricSpec(
        model_risk, "diagnostic", (-INF, INF), needs="loss", terms=terms.model_risk_fold
    ),
    "risk_gap": MetricSpec(
        risk_gap, "lower", (0.0, INF), needs="loss", terms=terms.risk_gap_fold, of_mean=np.abs
    ),
    "argmax_changed": MetricSpec(
        argmax_changed, "diagnostic", UNIT, needs="reference", terms=terms.argmax_changed_fold
    ),
    # Consistency-resampling tests (opt-in: 10,000 resamples cost seconds per fold).
    "confidence_ece_p_value": MetricSpec(confidence_ece_p_value, "higher", UNIT),
    "classwise_ece_p_value": MetricSpec(classwise_ece_p_value, "higher", UNIT),
    "confidence_ece_accepted": MetricSpec(confidence_ece_accepted, "higher", UNIT),
    "classwise_ece_accepted": MetricSpec(classwise_ece_accepted, "higher", UNIT),
}

#: Every metric by name, the library's and the paper packs' (a pack's ``METRICS``, looked up
#: only for a name the library does not hold).
METRICS = PackRegistry("METRICS", LIBRARY_METRICS, "metric")


def metric_spec(function_name: str) -> MetricSpec:
    try:
        return METRICS[function_name]
    except KeyError:
        raise unknown_name("metric", function_name, METRICS) from None


def evaluate(
    metrics: dict,
    probs,
    *,
    y,
    true_probs=None,
    reference_probs=None,
    loss_matrix=None,
    shift_weights=None,
):
    """Compute each configured metric; ``metrics`` maps an output name to its options.

    An option ``fn`` names the registered function when the output name differs from it
    (``confidence_ece_size15: {fn: confidence_ece, binning: equal_size}``). Metrics that
    need the true map are skipped where it is unknown.
    """
    values = {}
    for out_name, options in metrics.items():
        options = dict(options or {})
        spec = metric_spec(options.pop("fn", out_name))
        f = spec.function
        if spec.needs == "true_probs":
            if true_probs is None:
                continue
            values[out_name] = f(probs, true_probs, **options)
        elif spec.needs == "labels_or_true":
            values[out_name] = f(probs, y, true_probs=true_probs, **options)
        elif spec.needs == "reference":
            values[out_name] = f(probs, reference_probs, **options)
        elif spec.needs == "loss":
            extra = {} if shift_weights is None else {"shift_weights": shift_weights}
            values[out_name] = f(probs, y, loss_matrix=loss_matrix, **options, **extra)
        else:
            values[out_name] = f(probs, y, **options)
    return values


def _stored_spec(metric_name: str, metrics_config: dict | None) -> MetricSpec | None:
    """The spec behind a stored or output metric name, its ``fn`` alias resolved through
    ``metrics_config`` (default: every shipped metric set, as a results store mixes them);
    None for a risk curve's point (``empirical_risk@eps=...``)."""
    from calbench.decision.family import curve_eps

    if curve_eps(metric_name) is not None:
        return None
    options = (_shipped_outputs() if metrics_config is None else metrics_config).get(metric_name)
    return metric_spec((options or {}).get("fn", metric_name))


def is_diagnostic(metric_name: str, metrics_config: dict | None = None) -> bool:
    """Whether a stored or output metric name is a diagnostic (`MetricSpec.diagnostic`); a
    name no metric defines (a runner's count, e.g. ``wrong_certainties``) is not one."""
    try:
        spec = _stored_spec(metric_name, metrics_config)
    except CalbenchError:
        return False
    return spec is not None and spec.diagnostic


def higher_is_better(metric_name: str, metrics_config: dict | None = None) -> bool:
    """Direction of a stored or output metric name (`_stored_spec`); a risk curve's point
    is a risk, lower is better. The one home of the direction: tables, figures and reports
    all ask here."""
    spec = _stored_spec(metric_name, metrics_config)
    return spec is not None and spec.higher_is_better


@lru_cache(maxsize=1)
def _shipped_outputs() -> dict:
    """Output name -> options over every shipped metric set (``conf/metrics``)."""
    from calbench.conf_files import metric_sets

    return {name: opts for metrics in metric_sets().values() for name, opts in metrics.items()}


__all__ = [
    "LIBRARY_METRICS",
    "METRICS",
    "MetricSpec",
    "accuracy",
    "argmax_changed",
    "average_loss_gap",
    "brier",
    "calibration_brier",
    "calibration_log_loss",
    "classwise_ece",
    "classwise_ece_accepted",
    "classwise_ece_p_value",
    "confidence_ece",
    "confidence_ece_accepted",
    "confidence_ece_p_value",
    "confidence_ece_sweep",
    "confidence_variance",
    "debiased_ece",
    "empirical_risk",
    "evaluate",
    "kde_ece",
    "ks_error",
    "kuiper_error",
    "l2_ece_interval",
    "l2_ece_squared",
    "log_loss",
    "lp_calibration_error",
    "mce",
    "model_risk",
    "overconfidence_error",
    "refinement_brier",
    "refinement_log_loss",
    "risk_gap",
    "skce",
    "skce_p_value",
    "smooth_ece",
    "top1_brier",
    "true_classwise_ce",
    "true_confidence_ce",
    "underconfidence_error",
]
