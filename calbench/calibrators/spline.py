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
    ranks : int
        Recalibrate the top-``ranks`` scores, each by its own spline of the r-th largest
        score against "the label is the r-th class" (Gupta sec. 4.2's top-r calibration).
        Lower ranks are then capped so the classes keep their order and the row its mass.
    within_top : int or None
        Also fit a spline of the summed top-w scores against "the label is among the top w"
        (Gupta's within-top-w calibration, their Table 4) and give the top-w classes that
        total; the top class keeps its value, the others share in proportion.
    """

    input_kind = "probabilities"

    def __init__(self, n_knots=6, ranks=1, within_top=None):
        self.n_knots = n_knots
        self.ranks = ranks
        self.within_top = within_top

    def _fit(self, logits, y):
        n_knots = check_int(self.n_knots, "n_knots", "spline", minimum=2)
        ranks = check_int(self.ranks, "ranks", "spline")
        probs = softmax(logits)
        if ranks > probs.shape[1]:
            raise CalbenchError(f"spline: ranks={ranks} exceeds the {probs.shape[1]} classes.")
        if len(y) < 2 * n_knots:
            raise CalbenchError(
                f"spline needs at least {2 * n_knots} calibration samples for {n_knots} knots; "
                f"got {len(y)}. Use fewer knots."
            )
        ranked = np.argsort(-probs, axis=1, kind="stable")[:, :ranks]
        self.knots_ = np.linspace(0.0, 1.0, n_knots)
        design_basis = natural_spline_basis(self.knots_)
        self.knot_values_, self.sorted_scores_ = [], []
        n = len(y)
        fractiles = np.arange(1, n + 1) / n
        design = np.column_stack([b(fractiles) for b in design_basis])

        def fit_one(scores, hits):
            order = np.argsort(scores, kind="stable")
            values, *_ = np.linalg.lstsq(design, np.cumsum(hits[order]) / n, rcond=None)
            return values, scores[order]

        for r in range(ranks):
            values, sorted_scores = fit_one(
                probs[np.arange(n), ranked[:, r]], (ranked[:, r] == y).astype(np.float64)
            )
            self.knot_values_.append(values)
            self.sorted_scores_.append(sorted_scores)
        self.within_ = None
        if self.within_top is not None:
            w = check_int(self.within_top, "within_top", "spline", minimum=2)
            if w > probs.shape[1]:
                raise CalbenchError(f"spline: within_top={w} exceeds the {probs.shape[1]} classes.")
            top_w = np.argsort(-probs, axis=1, kind="stable")[:, :w]
            summed = np.take_along_axis(probs, top_w, axis=1).sum(axis=1)
            self.within_ = fit_one(summed, (top_w == y[:, None]).any(axis=1).astype(np.float64))

    def _derivative(self, knot_values, sorted_scores, scores):
        n = len(sorted_scores)
        fractile = np.interp(scores, sorted_scores, np.arange(1, n + 1) / n)
        spline = CubicSpline(self.knots_, knot_values, bc_type="natural")
        return np.clip(spline.derivative()(fractile), 0.0, 1.0)

    def recalibrate(self, scores: np.ndarray, rank: int = 1) -> np.ndarray:
        """Calibrated r-th largest probabilities for raw r-th scores (rank 1: confidence)."""
        return self._derivative(self.knot_values_[rank - 1], self.sorted_scores_[rank - 1], scores)

    def _within(self, probs, out):
        """Give the top-w classes their calibrated total, within the bounds that keep the
        top class first: the others of the top w and the rest scale in proportion."""
        w = int(self.within_top)
        ranked = np.argsort(-probs, axis=1, kind="stable")
        members, rest = ranked[:, 1:w], ranked[:, w:]
        top = out.max(axis=1)
        mem = np.take_along_axis(out, members, axis=1)
        oth = np.take_along_axis(out, rest, axis=1)
        tiny = np.finfo(float).tiny
        target = self._derivative(*self.within_, np.take_along_axis(probs, ranked[:, :w], 1).sum(1))
        # 1e-9 inside the bounds: no other class may tie the top one (argmax takes the first).
        shrink = 1.0 - 1e-9
        high = np.minimum(1.0, top + shrink * top * mem.sum(1) / np.maximum(mem.max(1), tiny))
        low = top
        if rest.shape[1]:
            low = np.maximum(top, 1.0 - shrink * top * oth.sum(1) / np.maximum(oth.max(1), tiny))
        current = top + mem.sum(axis=1)
        total = np.where(low <= high, np.clip(target, low, high), current)
        scale_mem = np.divide(total - top, mem.sum(1), out=np.ones_like(top), where=mem.sum(1) > 0)
        np.put_along_axis(out, members, mem * scale_mem[:, None], axis=1)
        if rest.shape[1]:
            scale = np.divide(1.0 - total, oth.sum(1), out=np.ones_like(top), where=oth.sum(1) > 0)
            np.put_along_axis(out, rest, oth * scale[:, None], axis=1)
        return out

    def _predict_proba(self, logits):
        probs = softmax(logits)
        out = replace_top(probs, self.recalibrate(probs.max(axis=1)))
        rows = np.arange(len(probs))
        ranked = np.argsort(-probs, axis=1, kind="stable")
        for r in range(2, len(self.knot_values_) + 1):
            cls = ranked[:, r - 1]
            above = out[rows, ranked[:, r - 2]]
            # The unranked classes hold what the ranks above leave; the r-th takes its
            # calibrated value from that, never more than the rank above it.
            free = out[rows, cls] + out.sum(axis=1, where=_below(ranked, r))
            rest = free - out[rows, cls]
            # Raised, as in replace_top, so no lower class overtakes it once rescaled.
            nxt = out[rows, ranked[:, r]] if r < probs.shape[1] else np.zeros(len(probs))
            floor = nxt * free / np.maximum(rest + nxt, np.finfo(float).tiny) + 1e-12
            value = np.maximum(self.recalibrate(probs[rows, cls], r), floor)
            value = np.minimum(np.minimum(value, above), free)
            scale = np.divide(free - value, rest, out=np.zeros_like(rest), where=rest > 0)
            lower = _below(ranked, r)
            out = np.where(lower, out * scale[:, None], out)
            out[rows, cls] = value
            spread = (rest <= 0) & (free > value)  # no lower mass to scale: share it evenly
            if spread.any():
                n_lower = lower.sum(axis=1)
                share = np.where(n_lower > 0, (free - value) / np.maximum(n_lower, 1), 0.0)
                out = np.where(lower & spread[:, None], share[:, None], out)
        return self._within(probs, out) if self.within_ is not None else out


def _below(ranked: np.ndarray, r: int) -> np.ndarray:
    """Mask of each row's classes ranked below the r-th."""
    mask = np.zeros(ranked.shape, dtype=bool)
    np.put_along_axis(mask, ranked[:, r:], True, axis=1)
    return mask
