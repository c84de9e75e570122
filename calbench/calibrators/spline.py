r"""Spline recalibration of the top-1 confidence (Gupta et al. 2021, sec. 4 and App. C).

Sort the calibration confidences :math:`z_i` and let :math:`h_i = \frac1N\sum_{j\le i} 1[\hat y_j
= y_j]` be the cumulative accuracy at fractile :math:`t_i = i/N`. Proposition 4.1: the
derivative :math:`h'(t)` is :math:`P(\text{correct} \mid z = s(t))`. A natural cubic spline
with K equally spaced knots on [0, 1] is fitted to :math:`(t_i, h_i)` by linear least
squares (its value anywhere is a linear function of its knot values, via natural-spline
interpolation of unit vectors), and a new confidence z is recalibrated to :math:`h'(F(z))`,
F the calibration confidences' empirical CDF (linearly interpolated), clipped to [0, 1].

The top class keeps the calibrated confidence; the other classes share the rest in
proportion to their probabilities (calbench's convention for confidence calibrators), and
the predicted class never changes, so top-1 accuracy is kept as Gupta et al. report.
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline

from calbench.calibrators.base import Calibrator
from calbench.errors import CalbenchError, check_int
from calbench.simplex import softmax


def natural_spline_basis(knots: np.ndarray):
    """One natural cubic spline per knot (1 there, 0 at the others)."""
    return [CubicSpline(knots, np.eye(len(knots))[j], bc_type="natural") for j in range(len(knots))]


def replace_top(probs: np.ndarray, top_values: np.ndarray) -> np.ndarray:
    """Set each row's top probability to ``top_values``; scale the others to fill the rest.

    A top value so low that a rescaled runner-up would overtake it, ``c < p2 / (r + p2)`` with
    r the other classes' mass,
    is raised just above that bound, so the predicted class (and accuracy) never changes.
    """
    rows = np.arange(len(probs))
    top = probs.argmax(axis=1)
    # The others' mass summed directly: 1 - p1 cancels catastrophically when p1 is near 1.
    rest = probs.sum(axis=1, where=np.arange(probs.shape[1]) != top[:, None])
    p2 = np.sort(probs, axis=1)[:, -2]
    bound = p2 / np.maximum(rest + p2, np.finfo(float).tiny)
    # 1e-12 above the bound survives the rescaling's rounding, where one ulp did not.
    top_values = np.where(top_values > bound + 1e-12, top_values, bound + 1e-12)
    top_values = np.minimum(top_values, 1.0)
    # (Near) one-hot rows, whose other mass is below any usable scale (subnormal or 0),
    # spread the freed mass evenly over the other classes instead.
    lone = rest < 1e-300
    out = probs * ((1.0 - top_values) / np.where(lone, 1.0, rest))[:, None]
    out[rows, top] = top_values
    if lone.any():
        k = probs.shape[1]
        out[lone] = ((1.0 - top_values[lone]) / (k - 1))[:, None]
        out[rows[lone], top[lone]] = top_values[lone]
    return out


class SplineCalibrator(Calibrator):
    """Parameters
    ----------
    n_knots : int
        Equally spaced knots of the natural cubic spline (Gupta uses 6 to 14).
    """

    input_kind = "probabilities"

    def __init__(self, n_knots=6):
        self.n_knots = n_knots

    def _fit(self, logits, y):
        n_knots = check_int(self.n_knots, "n_knots", "spline", minimum=2)
        probs = softmax(logits)
        scores = probs.max(axis=1)
        correct = (probs.argmax(axis=1) == y).astype(np.float64)
        if len(y) < 2 * n_knots:
            raise CalbenchError(
                f"spline needs at least {2 * n_knots} calibration samples for {n_knots} knots; "
                f"got {len(y)}. Use fewer knots."
            )
        order = np.argsort(scores, kind="stable")
        n = len(y)
        fractiles = np.arange(1, n + 1) / n
        cumulative = np.cumsum(correct[order]) / n
        knots = np.linspace(0.0, 1.0, n_knots)
        basis = natural_spline_basis(knots)
        design = np.column_stack([b(fractiles) for b in basis])
        self.knot_values_, *_ = np.linalg.lstsq(design, cumulative, rcond=None)
        self.knots_ = knots
        self.sorted_scores_ = scores[order]

    def recalibrate(self, scores: np.ndarray) -> np.ndarray:
        """Calibrated confidence for raw top-1 scores."""
        n = len(self.sorted_scores_)
        fractile = np.interp(scores, self.sorted_scores_, np.arange(1, n + 1) / n)
        spline = CubicSpline(self.knots_, self.knot_values_, bc_type="natural")
        return np.clip(spline.derivative()(fractile), 0.0, 1.0)

    def _predict_proba(self, logits):
        probs = softmax(logits)
        return replace_top(probs, self.recalibrate(probs.max(axis=1)))
