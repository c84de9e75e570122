"""One-vs-rest binary calibration maps, renormalised (Valk 2.5.1; Kull 4.1).

Each class j gets its own map of ``p_j`` fitted to ``1[y = j]``; the k outputs are then
divided by their sum. A row whose maps all output 0 becomes uniform (as scikit-learn's
CalibratedClassifierCV does), so rows always lie on the simplex.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from calbench.calibrators.base import Calibrator
from calbench.calibrators.bounds import PseudoCountBound
from calbench.calibrators.constraints import Choice
from calbench.metrics.binned import bin_indices
from calbench.simplex import TINY, softmax


class OneVsRestCalibrator(Calibrator):
    """Fits ``_fit_binary`` per class; ``_apply_binary`` maps scores of one class. On a
    two-class task one map, class 1's, and class 0 its complement: the binary calibration
    the binary methods were made for, as CalArena applies them (a map per class, then
    renormalised, moved its cv-binary numbers: Hist-quantile's Brier 0.022836 against its
    0.022773 on DenseNet-40's animals against machines)."""

    input_kind = "probabilities"

    def _scores(self, logits):
        """The probabilities the per-class maps read."""
        return softmax(logits)

    def _fit(self, logits, y):
        probs = self._scores(logits)
        self.maps_ = [
            self._fit_binary(probs[:, j], (y == j).astype(np.float64))
            for j in binary_columns(probs.shape[1])
        ]

    def _binary_outputs(self, probs):
        """Each class's map on its own column, before renormalising (two classes: class 1's
        map and its complement)."""
        columns = binary_columns(probs.shape[1])
        out = np.column_stack(
            [
                np.clip(self._apply_binary(m, probs[:, j]), 0.0, 1.0)
                for j, m in zip(columns, self.maps_, strict=True)
            ]
        )
        return np.column_stack([1.0 - out[:, 0], out[:, 0]]) if len(columns) == 1 else out

    @staticmethod
    def combine_per_class(models, logits, y, clip=1e-15):
        """Class j's map from the model whose binary map rates best on (column j of
        ``logits``'s probabilities, 1[y = j]) by binary log-loss, clipped to [clip, 1 - clip]
        as scikit-learn's ``log_loss`` of Kull et al.'s code: (combined model, the chosen
        model's index per class), the first of ties."""
        probs = softmax(np.asarray(logits, dtype=np.float64))
        k = probs.shape[1]
        outcomes = np.arange(k) == np.asarray(y)[:, None]
        losses = []
        for model in models:
            q = np.clip(model._binary_outputs(probs), clip, 1 - clip)
            losses.append(-np.where(outcomes, np.log(q), np.log1p(-q)).mean(axis=0))
        best = np.argmin(losses, axis=0)
        if k == 2:  # one map, class 1's: chosen on class 1's column
            best = best[1:]
        combined = copy.deepcopy(models[0])
        combined.maps_ = [models[b].maps_[j] for j, b in enumerate(best)]
        return combined, [int(b) for b in best]

    def _predict_proba(self, logits):
        return renormalised(self._binary_outputs(self._scores(logits)))


def binary_columns(k: int) -> list[int]:
    """The classes a binary method is fitted on: class 1 of two, else each against the rest
    (rows then `renormalised`), as CalArena applies its binary methods."""
    return [1] if k == 2 else list(range(k))


def class_probabilities(mapped: np.ndarray, k: int) -> np.ndarray:
    """Class probabilities from a binary method's maps on its `binary_columns`: class 1's
    and its complement for two classes, else each class's against the rest, `renormalised`."""
    if k == 2:
        return np.column_stack([1 - mapped[:, 0], mapped[:, 0]])
    return renormalised(mapped)


def renormalised(out: np.ndarray) -> np.ndarray:
    """One-vs-rest outputs (n, k) divided by their row sums; an all-zero row uniform."""
    sums = out.sum(axis=1, keepdims=True)
    uniform = np.full_like(out, 1.0 / out.shape[1])
    return np.where(sums > 0, out / np.where(sums > 0, sums, 1.0), uniform)


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


class IsotonicCalibrator(PseudoCountBound, OneVsRestCalibrator):
    """Isotonic regression per class (scikit-learn's, clipped to [0, 1] outside the data).

    ``tie_break`` adds that multiple of the original probability before renormalising, so
    that classes mapped to the same isotonic value keep their order (Zhang et al.'s IROvA
    uses 1e-9; Kull's Isot uses none).

    Parameters
    ----------
    tie_break : float
        Weight of the original probability added to each class's isotonic value.
    pseudo_count : float
        Smooth the predictions as if this many evenly labelled samples were added to the
        calibration set (`calbench.calibrators.bounds`): 0 (the published algorithm) can
        give classes exactly 0 or 1; the method ``isotonic`` uses 1, ``isotonic_plain``
        (Kull's and Valk's) 0.
    """

    def __init__(self, tie_break=0.0, pseudo_count=0.0):
        self.tie_break = tie_break
        self.pseudo_count = pseudo_count

    def _fit_binary(self, scores, outcomes):
        return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(scores, outcomes)

    def _apply_binary(self, fitted, scores):
        return fitted.predict(scores) + self.tie_break * scores


class BetaCalibrator(OneVsRestCalibrator):
    r"""Beta calibration per class (Kull et al. 2017), the three-parameter family:

    .. math:: \hat c(p) = \sigma(a \ln p - b \ln(1 - p) + c), \quad a, b \ge 0

    fitted as a logistic regression on :math:`(\ln p, -\ln(1-p))`. As in the betacal package:
    scores are clipped to [eps, 1 - eps] (float64 machine epsilon) and, when ``a`` comes out
    negative, it is fixed at 0 and ``b`` refitted alone (else the same for a negative ``b``).
    One map per class (one-vs-rest), rows renormalised; checked against betacal's
    ``BetaCalibration("abm")`` in tests/calibrators/test_nonparametric.py.

    Parameters
    ----------
    None
    """

    def _features(self, scores):
        eps = np.finfo(np.float64).eps
        s = np.clip(scores, eps, 1 - eps)
        return np.column_stack([np.log(s), -np.log1p(-s)])

    def _fit_binary(self, scores, outcomes):
        x = self._features(scores)
        if outcomes.min() == outcomes.max():
            # A class absent (or alone) in the fold: the constant frequency, kept off 0 and 1.
            rate = float(np.clip(outcomes.mean(), TINY, 1 - 1e-12))
            return np.zeros(2), np.log(rate / (1 - rate))
        coef, intercept = _logistic(x, outcomes)
        for negative, other in ((0, 1), (1, 0)):
            if coef[negative] < 0:
                alone, intercept = _logistic(x[:, [other]], outcomes)
                coef = np.zeros(2)
                coef[other] = alone[0]
                break
        return coef, intercept

    def _apply_binary(self, fitted, scores):
        coef, intercept = fitted
        z = self._features(scores) @ coef + intercept
        return 1.0 / (1.0 + np.exp(-z))


def _logistic(x, outcomes):
    """Unregularised (C = 1e11, as betacal) logistic regression: coefficients, intercept."""
    model = LogisticRegression(C=1e11, tol=1e-10, max_iter=10_000).fit(x, outcomes)
    return model.coef_[0].copy(), float(model.intercept_[0])
