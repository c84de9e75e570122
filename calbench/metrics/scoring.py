"""Accuracy and the proper scoring rules."""

from __future__ import annotations

import numpy as np

from calbench.metrics._checks import probs_and_labels
from calbench.simplex import TINY


def accuracy(probs, y) -> float:
    """Share of samples whose most probable class (first on ties) is the label."""
    p, y = probs_and_labels(probs, y, "accuracy")
    return float((p.argmax(axis=1) == y).mean())


def log_loss(probs, y) -> float:
    r"""Mean negative log-probability of the label, :math:`-\frac1n\sum_i \ln p_{i,y_i}`.

    A zero probability is clipped to the smallest float64 (2.2e-308, as Kull et al.), so a
    confidently wrong prediction costs about 708 instead of infinity.
    """
    p, y = probs_and_labels(probs, y, "log_loss")
    return float(-np.log(np.clip(p[np.arange(len(y)), y], TINY, None)).mean())


def brier(probs, y) -> float:
    r"""Multi-class Brier score :math:`\frac1n\sum_i\sum_j (p_{ij} - [y_i = j])^2` (0 to 2)."""
    p, y = probs_and_labels(probs, y, "brier")
    sq = (p**2).sum(axis=1) - 2 * p[np.arange(len(y)), y] + 1
    return float(sq.mean())


def top1_brier(probs, y) -> float:
    r"""Top-1 Brier score (Gupta et al. Table 7): :math:`\frac1n\sum_i (\max_j p_{ij} -
    [\arg\max_j p_{ij} = y_i])^2`, the squared error of the confidence alone."""
    p, y = probs_and_labels(probs, y, "top1_brier")
    top = p.argmax(axis=1)
    return float(((p[np.arange(len(y)), top] - (top == y)) ** 2).mean())


def confidence_variance(probs, y=None) -> float:
    """Variance of the confidences ``max p`` (Hoki Fig. 3 plots log ECE against it)."""
    p, _ = probs_and_labels(
        probs, np.zeros(len(probs), dtype=int) if y is None else y, "confidence_variance"
    )
    return float(p.max(axis=1).var())
