r"""Debiased squared L2-ECE and its confidence interval (Sun, Chaudhari, Barnett and
Dobriban 2024, "A confidence interval for the :math:`\ell_2` expected calibration error",
arXiv:2408.08998; the authors' code, github.com/sylydya/CI-ECE).

Top-1-to-k calibration: :math:`Z` the k largest predicted probabilities, :math:`Y` whether
the label is each of those classes, :math:`U = Y - Z`. Each of the k coordinates is cut
into ``n_bins`` equal-width bins of [0, 1] (a value of exactly 1 in the last), and the
estimate of the squared L2-ECE is the per-bin U-statistic

.. math::

    T = \sum_b \frac{n_b}{n} \cdot \frac{1}{n_b (n_b - 1)} \sum_{i \ne j \in b}
    \langle U_i, U_j\rangle,

unbiased, given the bins' counts, for :math:`\sum_b P(b)\, \lVert E[U \mid b]\rVert^2`
(bins of a single sample add 0). That is the squared L2-ECE itself where
:math:`E[U \mid Z]` is constant within bins, and below it otherwise (Jensen), which more
bins shrink. For a miscalibrated model :math:`\sqrt n (T - \mathrm{ECE}^2)` is
asymptotically normal with variance (the influence function of T)

.. math::

    \sigma^2 = \sum_b \frac{n_b}{n}\big(4\, \bar U_b^\top S_b \bar U_b
    - 3 \lVert \bar U_b\rVert^4\big) - \Big(\sum_b \frac{n_b}{n}\lVert \bar U_b\rVert^2
    \Big)^2, \qquad S_b = \frac1{n_b} \sum_{i \in b} U_i U_i^\top.

The interval for :math:`\mathrm{ECE}^2` at level :math:`1 - \alpha` (the authors' "adjusted"
interval, respecting :math:`\mathrm{ECE}^2 \ge 0`), with :math:`T_+ = \max(T, 0)` and
:math:`s = \sigma / \sqrt n`: upper end :math:`T_+ + z_{1-\alpha/2}\, s`; lower end
:math:`T_+ - z_{1-\alpha/2}\, s` where :math:`T_+ \ge 2 z_{1-\alpha/2}\, s`, else
:math:`T_+ / 2` where :math:`T_+ \ge 2 z_{1-\alpha}\, s`, else
:math:`\max(T_+ - z_{1-\alpha}\, s, 0)`. The square roots of its ends bound the L2-ECE.
For a calibrated model T converges faster (rate 1/n) with another variance and
:math:`\sigma \to 0`, so the interval promises nothing at ECE = 0; test calibration there
(e.g. `calbench.metrics.skce_p_value`).
"""

from __future__ import annotations

from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from calbench.errors import CalbenchError, check_choice, check_int
from calbench.metrics._checks import probs_and_labels


class ECEInterval(NamedTuple):
    """The debiased estimate of the squared L2-ECE and its interval's ends."""

    estimate: float
    lower: float
    upper: float
    sigma: float


def top_k_residuals(p: np.ndarray, y: np.ndarray, topk: int) -> tuple[np.ndarray, np.ndarray]:
    """(Z, U): the k largest probabilities of each row and Y - Z over those classes."""
    order = np.argsort(-p, axis=1, kind="stable")[:, :topk]
    z = np.take_along_axis(p, order, axis=1)
    return z, (order == y[:, None]) - z


def _bin_of(z: np.ndarray, n_bins: int) -> np.ndarray:
    """One flat bin index per row over the k-dimensional grid of equal-width bins."""
    cells = np.minimum((z * n_bins).astype(np.int64), n_bins - 1)
    return (cells * n_bins ** np.arange(z.shape[1])[::-1]).sum(axis=1)


def _bin_sums(bins: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per occupied bin (in `numpy.unique` order), the sum of each column of ``values``;
    and each row's occupied bin."""
    _, inverse = np.unique(bins, return_inverse=True)
    return np.stack([np.bincount(inverse, weights=column) for column in values.T], axis=1), inverse


def _estimate_and_sigma(z: np.ndarray, u: np.ndarray, n_bins: int) -> tuple[float, float]:
    """T and sigma (module docstring)."""
    n = len(u)
    sums, inverse = _bin_sums(_bin_of(z, n_bins), np.column_stack([np.ones(n), u, u * u]))
    counts, total, squares = sums[:, 0], sums[:, 1 : 1 + u.shape[1]], sums[:, 1 + u.shape[1] :]
    pairs = (total**2).sum(axis=1) - squares.sum(axis=1)  # sum over i != j of <U_i, U_j>
    several = counts > 1
    estimate = float((pairs[several] / (counts[several] - 1)).sum() / n)
    mean = total / counts[:, None]
    # U_b' S_b U_b = mean over the bin of <U_b, U_i>^2
    projected = np.bincount(inverse, weights=((mean[inverse] * u).sum(axis=1)) ** 2) / counts
    length = (mean**2).sum(axis=1)
    share = counts / n
    variance = float((share * (4 * projected - 3 * length**2)).sum() - (share * length).sum() ** 2)
    return estimate, max(variance, 0.0) ** 0.5


def l2_ece_interval(probs, y, n_bins=15, topk=1, alpha=0.1) -> ECEInterval:
    r"""Sun et al.'s (2024) debiased squared L2-ECE and its confidence interval (module
    docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Equal-width bins per coordinate (``n_bins ** topk`` cells in all).
    topk : int
        How many of the largest probabilities are calibrated together (1: confidence
        calibration; the number of classes: full calibration).
    alpha : float
        One minus the interval's level, in (0, 1).

    Returns
    -------
    ECEInterval
        ``estimate`` T (squared L2-ECE; can be negative), the interval's ``lower`` and
        ``upper`` ends for the squared L2-ECE, and ``sigma``, the estimated asymptotic
        standard deviation of sqrt(n) T.
    """
    owner = "l2_ece_interval"
    n_bins = check_int(n_bins, "n_bins", owner)
    p, y = probs_and_labels(probs, y, owner)
    topk = check_int(topk, "topk", owner)
    if topk > p.shape[1]:
        raise CalbenchError(f"{owner}: topk={topk} is more than the {p.shape[1]} classes.")
    if not 0 < alpha < 1:
        raise CalbenchError(f"The 'alpha' parameter of {owner} must be in (0, 1). Got {alpha!r}.")
    z, u = top_k_residuals(p, y, topk)
    estimate, sigma = _estimate_and_sigma(z, u, n_bins)
    positive, s = max(estimate, 0.0), sigma / len(p) ** 0.5
    two_sided, one_sided = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(1 - alpha)
    if positive >= 2 * two_sided * s:
        lower = positive - two_sided * s
    elif positive >= 2 * one_sided * s:
        lower = positive / 2
    else:
        lower = max(positive - one_sided * s, 0.0)
    return ECEInterval(estimate, lower, positive + two_sided * s, sigma)


def l2_ece_squared(probs, y, n_bins=15, topk=1, alpha=0.1, value="estimate") -> float:
    r"""Sun et al.'s (2024) debiased estimate of the squared L2-ECE, or an end of its
    interval (`l2_ece_interval`; module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Equal-width bins per coordinate.
    topk : int
        How many of the largest probabilities are calibrated together.
    alpha : float
        One minus the interval's level (``value`` "lower" or "upper").
    value : {"estimate", "lower", "upper"}
        The estimate, or the lower or upper end of the interval.

    Returns
    -------
    float
        Lower is better; the estimate can be negative, in [-2, 2].
    """
    check_choice(value, "value", "l2_ece_squared", ECEInterval._fields[:3])
    return float(getattr(l2_ece_interval(probs, y, n_bins, topk, alpha), value))
