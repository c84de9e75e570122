r"""Binned calibration errors: confidence-ECE, classwise-ECE and MCE.

Definitions (Guo et al. 2017; Kull et al. 2019 eq. 4; Valk 2.4.1):

.. math::

    \mathrm{ECE}_\alpha = \Big(\sum_{b} \frac{|B_b|}{n}\,
        |\bar y_b - \bar p_b|^\alpha\Big)^{1/\alpha}

with the bins :math:`B_b` of one score (the confidence ``max p`` against ``1[argmax p = y]``,
or class j's probability against ``1[y = j]``). ``alpha=1`` is the usual ECE; ``alpha=2``
is the root of the bin-weighted squared gaps (torchmetrics' "l2" norm). Valk writes an
extra ``1/b`` factor in front of the sum; his tables and every library omit it, so do we.
Classwise-ECE is the mean of the k class-j ECEs (``reduction="sum"``: their sum, the scale of
Kull et al.'s deep-net Table 3, whose printed uncalibrated DenseNet-40 CIFAR-10 value 0.114
is 10 x the mean 0.0114). Empty bins contribute nothing.

Binning schemes:

- ``equal_width``: edges ``b / n_bins``; bin b is ``[e_b, e_{b+1})`` and the
  last bin is closed, so a score of exactly 1.0 falls in the last bin and 0.0 in the first.
  torchmetrics agrees on every score below 1.0 but puts exactly 1.0 in an extra bin.
- ``equal_size``: the scores sorted and cut into ``n_bins`` contiguous groups whose sizes
  differ by at most one (``numpy.array_split``): Valk's ``EqualSizeBinning``, which his
  tables use. Equal scores may straddle a cut, and then which of them fall on either side
  is the sort's choice: his ``np.argsort`` under numpy 1.19, whose introsort calbench
  follows (`calbench.numpy1_order`). It matters where a calibrator clips many rows to one
  confidence: on DenseNet-40 CIFAR-10 his KNN's 3411 equal test confidences straddle five
  cuts, and its confidence-ECE is 3.342 (printed 3.342) in his order, 3.354 in sample order.
- ``equal_size_stable``: as ``equal_size``, equal scores in sample order (a stable sort):
  the same bins on any machine without a reference algorithm to follow; calbench's
  ``equal_size`` before it followed Valk's order.
- ``digitize``: Kull et al.'s code (``binary_ECE`` in dirichletcal's experiments):
  ``numpy.digitize(p, numpy.linspace(0, 1, n_bins)) - 1``, i.e. ``n_bins - 1`` equal-width
  bins ``[i/(n_bins-1), (i+1)/(n_bins-1))`` and one more holding the scores equal to 1. Their
  "15 bins" are 14 bins of width 1/14.
"""

from __future__ import annotations

import numpy as np

from calbench import numpy1_order
from calbench.errors import check_choice, check_int
from calbench.metrics._checks import probs_and_labels

EQUAL_SIZE = ("equal_size", "equal_size_stable")
BINNINGS = ("equal_width", *EQUAL_SIZE, "digitize")
REDUCTIONS = ("mean", "sum")


def bin_indices(scores: np.ndarray, n_bins: int, binning: str) -> np.ndarray:
    """Bin of each score under the named scheme (see module docstring)."""
    if binning == "equal_width":
        # i / n_bins is the correctly rounded edge, so a score of 0.6 starts bin 6 of 10;
        # numpy.linspace gives 0.6000000000000001 there and would put it in bin 5.
        inner_edges = np.arange(1, n_bins) / n_bins
        return np.searchsorted(inner_edges, scores, side="right")
    if binning == "digitize":
        # Kull et al.'s edges exactly as their code computes them, linspace rounding included.
        return np.digitize(scores, np.linspace(0.0, 1.0, n_bins)) - 1
    sizes = [len(c) for c in np.array_split(np.arange(len(scores)), n_bins)]
    order = np.argsort(scores, kind="stable")
    # Which equal scores fall on either side of a cut is the only thing the order of ties
    # decides; where no run of them straddles a cut, sample order gives the same bins.
    cuts = np.cumsum(sizes)[:-1]
    cuts = cuts[(cuts > 0) & (cuts < len(scores))]
    if binning == "equal_size" and (scores[order[cuts - 1]] == scores[order[cuts]]).any():
        order = equal_size_order(scores, binning)
    bins = np.empty(len(scores), dtype=np.int64)
    bins[order] = np.repeat(np.arange(n_bins), sizes)
    return bins


def equal_size_order(scores: np.ndarray, binning: str = "equal_size") -> np.ndarray:
    """The order in which equal-size bins take the scores (module docstring): numpy 1.x's
    ``argsort``, or with ``equal_size_stable`` equal scores in sample order."""
    if binning == "equal_size_stable":
        return np.argsort(scores, kind="stable")
    return numpy1_order.argsort(scores)


def bin_statistics(scores, outcomes, n_bins: int, binning: str):
    """Per-bin counts, mean score and mean outcome (NaN for empty bins)."""
    bins = bin_indices(scores, n_bins, binning)
    n_slots = max(n_bins, int(bins.max()) + 1 if len(bins) else n_bins)  # digitize: p == 1
    counts = np.bincount(bins, minlength=n_slots).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score = np.bincount(bins, weights=scores, minlength=n_slots) / counts
        mean_outcome = np.bincount(bins, weights=outcomes, minlength=n_slots) / counts
    return counts, mean_score, mean_outcome


def _binned_error(scores, outcomes, n_bins, binning, alpha) -> float:
    statistics = bin_statistics(scores, outcomes, n_bins, binning)
    return _error_of_bins(*statistics, len(scores), alpha)


def _error_of_bins(counts, mean_score, mean_outcome, n, alpha) -> float:
    filled = counts > 0
    gaps = np.abs(mean_outcome[filled] - mean_score[filled]) ** alpha
    return float((counts[filled] / n @ gaps) ** (1.0 / alpha))


def _classwise_statistics(p, y, n_bins, binning):
    """`bin_statistics` of every class's column of ``p`` against ``1[y = j]``, one row a
    class, in one pass over ``p`` where the bins need no sort (equal width, digitize): at
    1,000 classes a column at a time copies each strided column and calls numpy 4,000
    times (25,000 rows: 1.1 s). Each bin's sums add the same numbers in the same (sample)
    order as `bin_statistics` of the column, so the errors are equal to the last bit."""
    n, k = p.shape
    bins = bin_indices(p, n_bins, binning)
    n_slots = max(n_bins, int(bins.max()) + 1)  # digitize: p == 1
    slots = (bins + n_slots * np.arange(k)).ravel()
    size = k * n_slots
    counts = np.bincount(slots, minlength=size).astype(np.float64).reshape(k, n_slots)
    score_sums = np.bincount(slots, weights=p.ravel(), minlength=size).reshape(k, n_slots)
    labels = bins[np.arange(n), y] + n_slots * y
    outcome_sums = np.bincount(labels, minlength=size).astype(np.float64).reshape(k, n_slots)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts, score_sums / counts, outcome_sums / counts


def top_label(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The confidence ``max_j p_ij`` (the first class on ties) and whether that class is
    the label, as floats: the pair every top-label measure bins or smooths."""
    top = p.argmax(axis=1)
    return p[np.arange(len(y)), top], (top == y).astype(np.float64)


def _options(owner, n_bins, binning, alpha):
    check_int(n_bins, "n_bins", owner)
    check_choice(binning, "binning", owner, BINNINGS)
    check_choice(alpha, "alpha", owner, (1, 2))


def confidence_ece(probs, y, n_bins=15, binning="equal_width", alpha=1) -> float:
    r"""Confidence-ECE (Guo et al. 2017): bins of ``max p`` against the accuracy in them,
    :math:`\sum_b \frac{|B_b|}{n} |\mathrm{acc}_b - \mathrm{conf}_b|` (module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Number of bins.
    binning : {"equal_width", "equal_size", "equal_size_stable", "digitize"}
        See the module docstring.
    alpha : {1, 2}
        Order of the norm: 1 the usual ECE, 2 the root of the weighted squared gaps.

    Returns
    -------
    float
        In [0, 1]; lower is better. torchmetrics' ``multiclass_calibration_error``
        agrees with ``equal_width`` below a confidence of exactly 1.0.
    """
    _options("confidence_ece", n_bins, binning, alpha)
    p, y = probs_and_labels(probs, y, "confidence_ece")
    return _binned_error(*top_label(p, y), n_bins, binning, alpha)


def classwise_ece(probs, y, n_bins=15, binning="equal_width", alpha=1, reduction="mean") -> float:
    """Classwise-ECE (Kull et al. 2019 eq. 4): the ECE of each class's probability
    ``p_j`` against ``1[y = j]``, averaged (or summed) over the classes.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Number of bins.
    binning : {"equal_width", "equal_size", "equal_size_stable", "digitize"}
        See the module docstring.
    alpha : {1, 2}
        Order of the norm: 1 the usual ECE, 2 the root of the weighted squared gaps.
    reduction : {"mean", "sum"}
        ``sum`` is the scale of Kull et al.'s deep-net Table 3 (k times the mean).

    Returns
    -------
    float
        In [0, 1] for the mean; lower is better.
    """
    _options("classwise_ece", n_bins, binning, alpha)
    check_choice(reduction, "reduction", "classwise_ece", REDUCTIONS)
    p, y = probs_and_labels(probs, y, "classwise_ece")
    if binning in EQUAL_SIZE:  # each column's own sort
        per_class = [
            _binned_error(p[:, j], (y == j).astype(np.float64), n_bins, binning, alpha)
            for j in range(p.shape[1])
        ]
    else:
        statistics = _classwise_statistics(p, y, n_bins, binning)
        per_class = [_error_of_bins(*rows, len(p), alpha) for rows in zip(*statistics, strict=True)]
    return float(np.sum(per_class) if reduction == "sum" else np.mean(per_class))


def mce(probs, y, n_bins=15, binning="equal_width") -> float:
    """Maximum calibration error (Guo et al. 2017): the largest ``|accuracy - confidence|``
    over the non-empty confidence bins.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Number of bins.
    binning : {"equal_width", "equal_size", "equal_size_stable", "digitize"}
        See the module docstring.

    Returns
    -------
    float
        In [0, 1]; lower is better.
    """
    _options("mce", n_bins, binning, 1)
    p, y = probs_and_labels(probs, y, "mce")
    counts, mean_score, mean_outcome = bin_statistics(*top_label(p, y), n_bins, binning)
    filled = counts > 0
    return float(np.abs(mean_outcome[filled] - mean_score[filled]).max())


def sweep_bin_count(scores, outcomes) -> int:
    """The most equal-size bins whose mean outcomes still rise (weakly) from bin to bin
    (Roelofs et al. 2022's monotonic sweep): more bins than that fit noise."""
    order = equal_size_order(scores)
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(outcomes, np.float64)[order])])
    n = len(scores)
    best = 1
    for n_bins in range(2, n + 1):
        sizes = np.full(n_bins, n // n_bins)
        sizes[: n % n_bins] += 1  # numpy.array_split's sizes, as `bin_indices`
        edges = np.concatenate([[0], np.cumsum(sizes)])
        means = np.diff(cumulative[edges]) / sizes
        if np.any(np.diff(means) < 0):
            break
        best = n_bins
    return best


def confidence_ece_sweep(probs, y, alpha=1) -> float:
    r"""Confidence-ECE with equal-size bins at a data-dependent count (Roelofs et al. 2022,
    "Mitigating bias in calibration error estimation", ECE_sweep with equal mass): the
    largest number of bins for which the accuracy per bin is monotone in the confidence.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    alpha : {1, 2}
        Order of the norm (Roelofs et al. report both).

    Returns
    -------
    float
        In [0, 1]; lower is better. Equal to ``confidence_ece(probs, y,
        n_bins=b, binning="equal_size", alpha=alpha)`` at the swept ``b``
        (`sweep_bin_count`).
    """
    _options("confidence_ece_sweep", 2, "equal_size", alpha)
    p, y = probs_and_labels(probs, y, "confidence_ece_sweep")
    confidence, correct = top_label(p, y)
    n_bins = sweep_bin_count(confidence, correct)
    return _binned_error(confidence, correct, n_bins, "equal_size", alpha)
