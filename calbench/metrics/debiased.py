r"""The debiased L2 calibration error of Kumar, Liang and Ma (2019, "Verified uncertainty
calibration"), as their package ``uncertainty-calibration`` computes it
(``lower_bound_scaling_ce`` with ``p=2, debias=True``).

Scores are cut into ``n_bins`` bins of about equal mass: the sorted scores split as
``numpy.array_split`` splits them, each cut at the midpoint between the last score of a part
and the first of the next (equal cuts merged), the last at 1; a score goes to the first bin
whose cut is at or above it. A bin b of :math:`n_b` points, mean score :math:`\bar p_b` and
mean outcome :math:`\bar y_b` contributes

.. math::

    \frac{n_b}{n}\Big[(\bar p_b - \bar y_b)^2 - \frac{\bar y_b (1 - \bar y_b)}{n_b - 1}\Big]

(0 for a bin of fewer than two points): the plug-in squared error less its expected excess,
an unbiased estimate of the binned squared error. The value is the square root of the sum,
0 where the sum is negative. ``mode="top"`` scores the top-label confidence against
correctness; ``"classwise"`` each class's probability against its indicator, each
class's squared error floored at 0, averaged over classes, then the root (their
``mode='marginal'``).
"""

from __future__ import annotations

import numpy as np

from calbench.errors import check_choice, check_int
from calbench.metrics._checks import probs_and_labels
from calbench.metrics.binned import top_label

MODES = ("top", "classwise")


def _cuts(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Their ``get_equal_bins``: midpoints between consecutive equal-count parts, and 1."""
    parts = np.array_split(np.sort(scores), min(n_bins, len(scores)))
    inner = [(a[-1] + b[0]) / 2.0 for a, b in zip(parts[:-1], parts[1:], strict=True)]
    return np.unique(np.array([*inner, 1.0]))


def debiased_squared_error(scores: np.ndarray, outcomes: np.ndarray, n_bins: int) -> float:
    """The debiased squared binned error of one score against one outcome (module
    docstring), before the root."""
    bins = np.searchsorted(_cuts(scores, n_bins), scores, side="left")
    counts = np.bincount(bins).astype(np.float64)
    mean_score = np.bincount(bins, scores) / np.maximum(counts, 1)
    mean_outcome = np.bincount(bins, outcomes) / np.maximum(counts, 1)
    excess = mean_outcome * (1 - mean_outcome) / np.maximum(counts - 1, 1)
    per_bin = np.where(counts >= 2, (mean_score - mean_outcome) ** 2 - excess, 0.0)
    return float(np.sum(counts * per_bin) / len(scores))


def debiased_ece(probs, y, n_bins=15, mode="top") -> float:
    r"""Kumar et al.'s debiased L2 calibration error (module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Bins of about equal mass (theirs: 15).
    mode : {"top", "classwise"}
        The top-label confidence, or each class averaged (their ``marginal``).

    Returns
    -------
    float
        An estimate of the L2 calibration error, in [0, 1]; lower is better. Equal to
        ``calibration.get_calibration_error(..., p=2, debias=True, mode="top-label")`` of
        their package for ``mode="top"`` (its default ``mode="marginal"`` is this
        function's ``classwise``) on scores where it takes the scaling branch
        (tests/metrics/test_debiased.py).
    """
    check_choice(mode, "mode", "debiased_ece", MODES)
    n_bins = check_int(n_bins, "n_bins", "debiased_ece")  # (2.7 was read as 2)
    p, y = probs_and_labels(probs, y, "debiased_ece")
    if mode == "top":
        scores, outcomes = top_label(p, y)
        squared = debiased_squared_error(scores, outcomes.astype(np.float64), int(n_bins))
    else:
        squared = np.mean(  # each class's estimate floored at 0 before the mean, as theirs
            [
                max(debiased_squared_error(p[:, j], (y == j) * 1.0, int(n_bins)), 0.0)
                for j in range(p.shape[1])
            ]
        )
    return float(np.sqrt(max(squared, 0.0)))
