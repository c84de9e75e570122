"""Gupta et al.'s spline as their ``recalibrate.py`` ran it (the ``*_gupta_code`` methods):
the library's `SplineCalibrator` with its hooks set to that code's arithmetic, where it
differs from the paper's description.

- its float32 scores (`scipy_2020_softmax`: many tied at exactly 1.0);
- its float32 cumulative score (``np.cumsum`` of the float32 scores);
- its tied scores in the order its ``scores.argsort()`` gave them under the numpy 1.x of 2020
  (its introsort, `calbench.numpy1_order`; numpy 2's SIMD sorts order ties otherwise);
- its interpolation of new scores (`reference_interpolation`, which swaps the weights of
  linear interpolation), and no renormalisation of the rows afterwards.

`RecalibratePyEveryRank` (``spline_gupta_every_rank_code``) is his Table 5's accuracy: the
same spline fitted to every rank 1..K, each class given its rank's recalibrated score, and
the prediction taken again as the largest of them, which can change the predicted class.
"""

from __future__ import annotations

import numpy as np

from calbench import numpy1_order
from calbench.calibrators.spline.gupta import SplineCalibrator


def scipy_2020_softmax(logits) -> np.ndarray:
    """The float32 probabilities Gupta's recalibrate.py computed: scipy.special.softmax of
    the float32 logits as scipy wrote it before 1.9 (PR 16186, 2022), ``exp(z -
    logsumexp(z))`` in float32, where a confident row's top score rounds to exactly 1.0
    (3257 of DenseNet-40 CIFAR-10's 5000 calibration rows; 2859 with today's softmax, which
    divides by the sum instead) and its rows miss summing to 1 by float32 rounding."""
    z = np.asarray(logits, dtype=np.float32)
    top = z.max(axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0
    log_total = np.log(np.exp(z - top).sum(axis=1, keepdims=True)) + top
    return np.exp(z - log_total).astype(np.float64)


def reference_interpolation(scores, sorted_scores, calibrated) -> np.ndarray:
    """recalibrate.py's ``interpolated_function``, as written: between the neighbouring
    calibration scores ``x[i-1] < s <= x[i]`` it returns ``(b * y[i] + a * y[i-1]) / (a +
    b)`` with ``a = s - x[i-1]`` and ``b = x[i] - s``, each end weighted by the *other*
    end's distance (linear interpolation swaps the weights), and the end values beyond
    the calibration scores."""
    x = np.asarray(sorted_scores, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    i = np.clip(np.searchsorted(x, s, side="left"), 1, len(x) - 1)
    a, b = s - x[i - 1], x[i] - s
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = (b * calibrated[i] + a * calibrated[i - 1]) / (a + b)
    return np.where(s >= x[-1], calibrated[-1], np.where(s <= x[0], calibrated[0], inside))


class RecalibratePySpline(SplineCalibrator):
    """Gupta et al.'s spline recalibration as their recalibrate.py computes it (see the
    module).

    Parameters
    ----------
    n_knots, ranks, within_top, pseudo_count : as `SplineCalibrator`'s
    seed : int or None
        The order of tied calibration scores: None, the order recalibrate.py's
        ``scores.argsort()`` gave them under the numpy 1.x of 2020 (`calbench.numpy1_order`);
        an int draws a random order from it, to see how far the order alone moves the fit.
    """

    _float32_sums = True
    _renormalise = False

    def _probabilities(self, logits):
        return scipy_2020_softmax(logits)

    _default_argsort = staticmethod(numpy1_order.argsort)
    _interpolate = staticmethod(reference_interpolation)


class RecalibratePyEveryRank(RecalibratePySpline):
    """Gupta et al.'s Table 5 (accuracy after calibration) as recalibrate.py's arithmetic
    gives it: the spline of `RecalibratePySpline` fitted to the r-th largest score against
    "the label is the r-th class" for every rank r = 1..K (his ``get_top_results`` with
    ``nn = -r``; its ``np.argpartition`` and a stable ranking agree on DenseNet-40
    CIFAR-10, which has no tied scores within a row), each class given its rank's
    recalibrated score, clipped to [0, 1], and the predicted class taken again as the
    largest (rows are divided by their sums, which keeps the argmax). Unlike the library's
    spline, which keeps the ranking, a class whose calibrated score overtakes the top
    one's becomes the prediction: on DenseNet-40 CIFAR-10 the accuracy goes from 92.42% to
    the 92.31% of his Table 5 (with numpy 1.x's order of the tied top scores; a stable
    sort gives 92.32%).

    Parameters
    ----------
    n_knots, pseudo_count, seed : as `RecalibratePySpline`'s (``ranks`` is every class).
    """

    _renormalise = True

    def __init__(self, n_knots=6, pseudo_count=0.0, seed=None):  # every rank, no within-top
        self.n_knots = n_knots
        self.pseudo_count = pseudo_count
        self.seed = seed

    def _fit(self, logits, y):
        probs = self._probabilities(logits)
        self._fit_ranks(probs, y, probs.shape[1])
        self.within_ = None

    def _predict_proba(self, logits):
        probs = self._probabilities(logits)
        rows = np.arange(len(probs))
        ranked = np.argsort(-probs, axis=1, kind="stable")
        out = np.empty_like(probs)
        for r in range(probs.shape[1]):
            out[rows, ranked[:, r]] = self.recalibrate(probs[rows, ranked[:, r]], r + 1)
        total = out.sum(axis=1, keepdims=True)
        # A row whose every score was clipped to 0 (none on the paper's nets) keeps its
        # uncalibrated probabilities, so that it stays a probability vector.
        return np.where(total > 0, out / np.where(total > 0, total, 1.0), probs)
