"""Histogram binning one-vs-rest: equal-width or equal-mass bins (Zadrozny and Elkan 2001;
Valk 2.5.1), and its smoothed variant."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.binary import OneVsRestCalibrator
from calbench.calibrators.bounds import PseudoCountBound
from calbench.calibrators.constraints import Choice
from calbench.metrics.binned import bin_indices


class HistogramBinning(PseudoCountBound, OneVsRestCalibrator):
    """Histogram binning (Zadrozny and Elkan): each bin predicts its label frequency.

    ``binning="equal_width"`` uses bins ``[b/B, (b+1)/B)``, ``"equal_size"`` (equal
    frequency) cuts the sorted calibration scores into B groups of equal count; a test score
    falls in the bin whose calibration scores' range covers it. An empty bin predicts its
    own mid-point (no evidence: no change). One-vs-rest: each class's map on ``p_j``
    against ``1[y = j]``, rows renormalised.

    Parameters
    ----------
    n_bins : int
        B, the number of bins.
    binning : {"equal_width", "equal_size"}
        Equal-width bins, or equal-frequency bins of the calibration scores.
    pseudo_count : float
        Smooth the predictions as if this many evenly labelled samples were added to the
        calibration set (`calbench.calibrators.bounds`); 0 (the published algorithm) lets a
        bin of one label predict exactly 0 or 1. Kull's ``histbin_freq``/``histbin_width``
        smooth each bin instead (`SmoothedBinning`).
    """

    _parameter_constraints = {
        "binning": Choice("equal_width", "equal_size"),
    }

    def __init__(self, n_bins=15, binning="equal_width", pseudo_count=0.0):
        self.n_bins = n_bins
        self.binning = binning
        self.pseudo_count = pseudo_count

    def _fit_binary(self, scores, outcomes):
        n_bins = int(self.n_bins)
        bins = bin_indices(scores, n_bins, self.binning)
        counts = np.bincount(bins, minlength=n_bins)
        sums = np.bincount(bins, weights=outcomes, minlength=n_bins)
        if self.binning == "equal_width":
            upper = np.arange(1, n_bins + 1) / n_bins
            mids = upper - 0.5 / n_bins
        else:
            order = np.sort(scores)
            last = np.cumsum(counts) - 1
            upper = np.where(counts > 0, order[np.clip(last, 0, None)], np.nan)
            mids = np.where(counts > 0, sums / np.maximum(counts, 1), 0.5)
        frequency = np.where(counts > 0, sums / np.maximum(counts, 1), mids)
        return upper, frequency

    def _apply_binary(self, fitted, scores):
        upper, frequency = fitted
        if self.binning == "equal_width":
            bins = bin_indices(scores, len(frequency), "equal_width")
        else:
            # Equal-size bins are defined by the calibration scores: a test score belongs to
            # the first bin whose largest calibration score is >= it.
            edges = upper[~np.isnan(upper)]
            bins = np.minimum(np.searchsorted(edges, scores, side="left"), len(edges) - 1)
            frequency = frequency[~np.isnan(upper)]
        return frequency[bins]


class SmoothedBinning(OneVsRestCalibrator):
    r"""Kull et al.'s one-vs-rest binning (experiments_neurips ``BinningCalibration``), their
    WidB and FreqB: each bin predicts its Laplace-smoothed label frequency
    :math:`(\text{positives} + \alpha) / (n_\text{bin} + 2\alpha)`, so an empty bin predicts 1/2
    instead of 0 (and no row's classes can all be 0).

    ``strategy="uniform"``: ``n_bins`` equal-width bins between the smallest and the largest
    calibration score; ``"quantile"``: edges at every ``ceil(n / n_bins)``-th sorted score
    (fewer bins where that step leaves fewer). The outer edges are open (scores below or
    above the calibration range fall in the first or last bin). Their code adds the last
    calibration score in input order as the quantile edges' end, then replaces it with
    +inf, so it never matters.

    Parameters
    ----------
    n_bins : int
        The number of bins (fewer with ``quantile`` where the step leaves fewer).
    strategy : {"uniform", "quantile"}
        Equal-width bins over the calibration range, or edges at sorted-score steps.
    alpha : float
        The Laplace pseudo-count of each bin's positives and negatives.
    """

    _parameter_constraints = {
        "strategy": Choice("uniform", "quantile"),
    }

    def __init__(self, n_bins=10, strategy="uniform", alpha=1.0):
        self.n_bins = n_bins
        self.strategy = strategy
        self.alpha = alpha

    def _fit_binary(self, scores, outcomes):
        n_bins = int(self.n_bins)
        alpha = float(self.alpha)
        if self.strategy == "quantile":
            step = int(np.ceil(len(scores) / n_bins))
            edges = np.append(np.sort(scores)[::step], np.inf)
        else:
            edges = np.linspace(scores.min(), scores.max(), n_bins + 1)
        edges[0], edges[-1] = -np.inf, np.inf
        bins = np.digitize(scores, edges) - 1
        counts = np.bincount(bins, minlength=n_bins)[:n_bins]
        positives = np.bincount(bins, weights=outcomes, minlength=n_bins)[:n_bins]
        return edges, (positives + alpha) / (counts + 2 * alpha)

    def _apply_binary(self, fitted, scores):
        edges, frequency = fitted
        return frequency[np.digitize(scores, edges) - 1]


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "histbin_width": (HistogramBinning, {"binning": "equal_width"}),
    "histbin_freq": (HistogramBinning, {"binning": "equal_size"}),
    "binning_width_smoothed": (SmoothedBinning, {"strategy": "uniform"}),
    "binning_freq_smoothed": (SmoothedBinning, {"strategy": "quantile"}),
}
