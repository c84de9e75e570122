"""Each mean-of-terms metric's per-sample terms on a fold of stored predictions (an object
with ``probs``, ``y``, ``uncalibrated``, ``true_probs`` and ``loss``), which a record points
to (`calbench.metrics.MetricSpec.terms`) and the bootstrap resamples: ``f(fold, **options)``
gives the terms, or None where the options make the metric no mean of them. The formulas
live beside their metrics (``*_terms`` in `calbench.metrics.scoring`, ``bayes_risk``,
``true_error``), which are their terms' means.
"""

from __future__ import annotations

from calbench.decision.risk import bayes_decisions
from calbench.metrics.bayes_risk import argmax_changed_terms
from calbench.metrics.scoring import accuracy_terms, brier_terms, log_loss_terms, top1_brier_terms
from calbench.metrics.true_error import true_confidence_ce_terms


def log_loss_fold(fold, clip=None, floor=None):
    return log_loss_terms(fold.probs, fold.y, clip, floor)


def brier_fold(fold):
    return brier_terms(fold.probs, fold.y)


def accuracy_fold(fold):
    return accuracy_terms(fold.probs, fold.y)


def top1_brier_fold(fold):
    return top1_brier_terms(fold.probs, fold.y)


def empirical_risk_fold(fold, reduction="mean"):
    if reduction != "mean":
        return None
    return fold.loss[fold.y, bayes_decisions(fold.probs, fold.loss)]


def model_risk_fold(fold, reduction="mean"):
    return (fold.probs @ fold.loss).min(axis=1) if reduction == "mean" else None


def risk_gap_fold(fold):
    """Terms whose mean's absolute value (``MetricSpec.of_mean``) is the risk gap."""
    return model_risk_fold(fold) - empirical_risk_fold(fold)


def argmax_changed_fold(fold):
    return argmax_changed_terms(fold.probs, fold.uncalibrated)


def true_confidence_ce_fold(fold, alpha=1):
    if fold.true_probs is None or alpha != 1:
        return None
    return true_confidence_ce_terms(fold.probs, fold.true_probs)
