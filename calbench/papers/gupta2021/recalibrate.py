"""Gupta et al.'s spline as their ``recalibrate.py`` ran it (the ``*_gupta_code`` methods):
the library's `SplineCalibrator` with its hooks set to that code's arithmetic, where it
differs from the paper's description.

- its float32 scores (`scipy_2020_softmax`: many tied at exactly 1.0);
- its float32 cumulative score (``np.cumsum`` of the float32 scores);
- its tied scores in the order its ``scores.argsort()`` gave them under the numpy 1.x of 2020
  (its introsort, `calbench.numpy1_order`; numpy 2's SIMD sorts order ties otherwise);
- its interpolation of new scores (`reference_interpolation`, which swaps the weights of
  linear interpolation), and no renormalisation of the rows afterwards.
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
