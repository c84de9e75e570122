r"""Spline recalibration of ranked scores (Gupta et al. 2021, sec. 4 and App. C), as their
code (``recalibrate.py``, ``utilities/spline.py``) computes it.

Sort the calibration scores :math:`s_1 \le \dots \le s_N` (the top-1 confidence, the r-th
largest probability, or the summed top-w), with hits :math:`h_i` (the label is that class, or
among those w). At the fractiles :math:`t_i = (i-1)/(N-1)` take the cumulative gap
:math:`G_i = \frac1N \sum_{j \le i} (h_j - s_j)` between accuracy and score, and fit a natural
cubic spline with K equally spaced knots on [0, 1] to :math:`(t_i, G_i)` by linear least
squares (its value anywhere is linear in its knot values). Proposition 4.1 makes the
derivative of the cumulative accuracy the calibrated probability, so each calibration score
is mapped to :math:`s_i + G'(t_i)`; a new score is mapped by linear interpolation between
the calibration scores (the end values beyond them) and clipped to [0, 1].

Fitting the *gap* rather than the cumulative accuracy itself (the function of the paper's
eq. 7) is what the reference code does: the spline then only smooths the miscalibration,
not the steep climb of the scores near 1, and on DenseNet-40 CIFAR-10 the top-1 KS error
falls to Gupta Table 1's 0.77% instead of about 1.5%.

The calibrated values are put back into a probability vector: the r-th class of each row
(ranked by the uncalibrated scores) takes its calibrated value, and the classes below share
the rest in proportion to their probabilities, none reaching it (water-filling), so the
ranking and the predicted class never change and a metric on the r-th largest output
reads the calibrated value, as Gupta's metrics read the recalibrated scores. Where no
vector with that ranking has the value (a value above the rank above it, or so small that
the rest cannot fit below it), the nearest value that has one is used.
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline

from calbench.calibrators.bounds import PseudoCountBound
from calbench.calibrators.constraints import NoneOr, Number
from calbench.calibrators.spline.ranked import (
    MARGIN,
    floor_fill,
    place_members,
    set_ranked_value,
    water_fill,
)
from calbench.errors import CalbenchError, check_int
from calbench.simplex import softmax


def natural_spline_basis(knots: np.ndarray):
    """One natural cubic spline per knot (1 there, 0 at the others)."""
    return [CubicSpline(knots, np.eye(len(knots))[j], bc_type="natural") for j in range(len(knots))]


def stable_argsort(scores: np.ndarray) -> np.ndarray:
    """The scores' order with tied scores in sample order."""
    return np.argsort(scores, kind="stable")


def fit_gap_spline(
    scores: np.ndarray, hits: np.ndarray, n_knots: int, argsort=stable_argsort, float32_sums=False
):
    """Gupta's recalibration of one score: (sorted calibration scores, their calibrated
    values, the spline's knot values); see the module docstring. ``argsort`` orders the
    scores, which decides the order of tied ones. ``float32_sums``: the cumulative score
    summed in float32, as recalibrate.py's ``np.cumsum`` of its float32 scores is."""
    order = argsort(scores)
    sorted_scores, n = scores[order], len(scores)
    fractiles = np.linspace(0.0, 1.0, n)
    if float32_sums:
        summed = np.cumsum(sorted_scores.astype(np.float32)) / np.float32(n)
        gap = np.cumsum(hits[order]) / n - summed.astype(np.float64)
    else:
        gap = np.cumsum(hits[order] - sorted_scores) / n
    knots = np.linspace(0.0, 1.0, n_knots)
    design = np.column_stack([b(fractiles) for b in natural_spline_basis(knots)])
    knot_values, *_ = np.linalg.lstsq(design, gap, rcond=None)
    slope = CubicSpline(knots, knot_values, bc_type="natural").derivative()(fractiles)
    return sorted_scores, sorted_scores + slope, knot_values


class SplineCalibrator(PseudoCountBound):
    """Parameters
    ----------
    n_knots : int
        Equally spaced knots of the natural cubic spline (Gupta: 6 for Tables 1, 2, 5 and 7,
        13 for Table 6, 14 for Table 4).
    ranks : int
        Recalibrate the top-``ranks`` scores, each by its own spline of the r-th largest
        score against "the label is the r-th class" (Gupta sec. 4.2's top-r calibration).
        0 (only with ``within_top``): recalibrate the summed top-w score alone.
    within_top : int or None
        Also fit a spline of the summed top-w scores against "the label is among the top w"
        (Gupta's within-top-w calibration, their Table 4) and give the top-w classes that
        total: with ``ranks >= 1`` the top class keeps its calibrated value and the others
        of the top w share the rest; with ``ranks=0`` the top w share it in proportion to
        their probabilities, as Gupta's code recalibrates the summed score on its own (a
        calibrated top-1 value and a calibrated top-2 total often fit no single vector).
    pseudo_count : float
        Smooth the predictions as if this many evenly labelled samples were added to the
        calibration set (`calbench.calibrators.bounds`): 0 (the published algorithm) can
        give classes exactly 0 or 1; the method ``spline`` uses 1, Gupta's variants
        (``spline_gupta``...) 0: their spline's overshoot gives DenseNet-40 CIFAR-10 2722
        confidences of exactly 1.
    seed : int or None
        The order of tied calibration scores, which moves the fitted spline when many tie.
        None: sample order (a stable sort; Gupta's recalibrate.py as it ran, the pack
        ``gupta2021``'s ``spline_gupta_code``, orders them as the numpy 1.x of 2020 did). An
        int draws a random order from it: a study of how far the order of ties can move the
        fit, not what any numpy did.

    A paper's arithmetic is a subclass that overrides the hooks (`_probabilities`,
    `_default_argsort`, ``_float32_sums``, `_interpolate`, ``_renormalise``), registered
    by its pack: ``calbench.papers.gupta2021`` replays recalibrate.py so.
    """

    input_kind = "probabilities"
    _parameter_constraints = {"seed": NoneOr(Number(0, integer=True))}
    #: The cumulative score summed in float32 (`fit_gap_spline`'s ``float32_sums``).
    _float32_sums = False
    #: Rows divided by their sums after the ranked values are set.
    _renormalise = True

    def __init__(
        self,
        n_knots=6,
        ranks=1,
        within_top=None,
        pseudo_count=0.0,
        seed=None,
    ):
        self.n_knots = n_knots
        self.ranks = ranks
        self.within_top = within_top
        self.pseudo_count = pseudo_count
        self.seed = seed

    def _probabilities(self, logits):
        """The probabilities the splines read."""
        return softmax(logits)

    @staticmethod
    def _default_argsort(scores):
        """The order of the calibration scores, ties included, where ``seed`` is None."""
        return stable_argsort(scores)

    @staticmethod
    def _interpolate(scores, sorted_scores, calibrated):
        """A new score's value between the calibration scores' (the ends beyond them)."""
        return np.interp(scores, sorted_scores, calibrated)

    def _fit(self, logits, y):
        n_knots = int(self.n_knots)
        ranks = check_int(self.ranks, "ranks", "spline", minimum=0 if self.within_top else 1)
        probs = self._probabilities(logits)
        if ranks > probs.shape[1]:
            raise CalbenchError(f"spline: ranks={ranks} exceeds the {probs.shape[1]} classes.")
        ranked, argsort = self._fit_ranks(probs, y, ranks)
        self.within_ = None
        if self.within_top is not None:
            w = check_int(self.within_top, "within_top", "spline", minimum=2)
            if w > probs.shape[1]:
                raise CalbenchError(f"spline: within_top={w} exceeds the {probs.shape[1]} classes.")
            summed = np.take_along_axis(probs, ranked[:, :w], axis=1).sum(axis=1)
            hits = (ranked[:, :w] == y[:, None]).any(axis=1).astype(np.float64)
            self.within_ = fit_gap_spline(summed, hits, n_knots, argsort, self._float32_sums)[:2]

    def _fit_ranks(self, probs, y, ranks: int):
        """The spline of each rank 1..``ranks`` (``maps_``, ``knot_values_``, ``knots_``);
        returns the classes' ranking and the calibration scores' sort, for what follows."""
        n_knots = int(self.n_knots)
        if len(y) < 2 * n_knots:
            raise CalbenchError(
                f"spline needs at least {2 * n_knots} calibration samples for {n_knots} knots; "
                f"got {len(y)}. Use fewer knots."
            )
        rows = np.arange(len(y))
        ranked = np.argsort(-probs, axis=1, kind="stable")
        argsort = self._tie_sort(len(y))
        self.knots_ = np.linspace(0.0, 1.0, n_knots)
        self.maps_, self.knot_values_ = [], []
        for r in range(ranks):
            hits = (ranked[:, r] == y).astype(np.float64)
            scores, calibrated, knot_values = fit_gap_spline(
                probs[rows, ranked[:, r]], hits, n_knots, argsort, self._float32_sums
            )
            self.maps_.append((scores, calibrated))
            self.knot_values_.append(knot_values)
        return ranked, argsort

    def _tie_sort(self, n: int):
        """How the calibration scores are sorted (``seed``): the order of tied ones."""
        if self.seed is not None:
            drawn = np.random.default_rng(self.seed).permutation(n)
            return lambda scores: drawn[np.argsort(scores[drawn], kind="stable")]
        return self._default_argsort

    def _apply(self, calibration_map, scores):
        sorted_scores, calibrated = calibration_map
        return np.clip(self._interpolate(scores, sorted_scores, calibrated), 0.0, 1.0)

    def recalibrate(self, scores: np.ndarray, rank: int = 1) -> np.ndarray:
        """Calibrated r-th largest probabilities for raw r-th scores (rank 1: confidence)."""
        return self._apply(self.maps_[rank - 1], scores)

    def _within_alone(self, probs, ranked, out):
        """Give the top-w classes their calibrated total T, in proportion to their
        probabilities but none below the share the other classes then need, (1 - T) over
        their number (`floor_fill`); the other classes share 1 - T below the smallest."""
        w = int(self.within_top)
        members, rest = ranked[:, :w], ranked[:, w:]
        n_rest = rest.shape[1]
        mem = np.take_along_axis(out, members, axis=1)
        target = self._apply(self.within_, mem.sum(axis=1))
        if not n_rest:
            return out
        room = n_rest * (1 - MARGIN)
        total = np.clip(target, w / (w + room), 1.0)  # w floors must fit in the total
        share = floor_fill(mem, total, (1.0 - total) / room)
        return place_members(out, members, share, rest, total)

    def _within(self, probs, ranked, out):
        """Give the top-w classes their calibrated total: the top class keeps its value, the
        others of the top w share the rest of the total below it, the remaining classes
        share what is left below the smallest of them (all by `water_fill`)."""
        w = int(self.within_top)
        if not self.maps_:
            return self._within_alone(probs, ranked, out)
        rows = np.arange(len(probs))
        top = out[rows, ranked[:, 0]]
        members, rest = ranked[:, 1:w], ranked[:, w:]
        n_rest = rest.shape[1]
        target = self._apply(self.within_, np.take_along_axis(probs, ranked[:, :w], 1).sum(1))
        # Feasible totals: the members fit under the top class, the rest under the members
        # (the members' smallest share is at most their mean; for w = 2 it is exact).
        high = top + (w - 1) * top * (1 - MARGIN)
        a = n_rest * (1 - MARGIN) / (w - 1)
        low = np.maximum(top, (1.0 + top * a) / (1.0 + a)) if n_rest else 1.0 + 0 * top
        total = np.clip(target, np.minimum(low, high), high)
        share = water_fill(
            np.take_along_axis(out, members, axis=1), total - top, top * (1 - MARGIN)
        )
        return place_members(out, members, share, rest, total)

    def _predict_proba(self, logits):
        probs = self._probabilities(logits)
        rows = np.arange(len(probs))
        ranked = np.argsort(-probs, axis=1, kind="stable")
        out = probs.copy()
        for r in range(len(self.maps_)):
            out = set_ranked_value(
                out, ranked, r, self.recalibrate(probs[rows, ranked[:, r]], r + 1)
            )
        if self.within_ is not None:
            out = self._within(probs, ranked, out)
        if not self._renormalise:
            # Rows already sum to 1 up to rounding; renormalising would move tied calibrated
            # scores by an ulp apart, and the KS error reads every position of a tie.
            return out
        return out / out.sum(axis=1, keepdims=True)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "spline": (SplineCalibrator, {}),
}
