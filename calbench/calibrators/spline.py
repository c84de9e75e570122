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

from calbench import numpy1_order
from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import binary_columns, class_probabilities
from calbench.calibrators.bounds import PseudoCountBound
from calbench.calibrators.constraints import Flag, NoneOr, Number
from calbench.errors import CalbenchError, check_int
from calbench.simplex import softmax

#: Relative margin that keeps a lower class strictly below the one above it: argmax and a
#: stable argsort take the first of tied classes, which could be a lower-ranked one.
_MARGIN = 1e-9
#: A floor on the weights the rest is shared by, so rows whose other classes underflowed to
#: (or below) the subnormal range share it evenly instead of dividing 0 by 0.
_TINY_WEIGHT = 1e-300


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


def water_fill(weights: np.ndarray, total: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Split each row's ``total`` over its columns in proportion to ``weights``, none above
    the row's ``cap``: the largest are capped and the others scaled up to make up the rest.
    Rows need ``total <= n_columns * cap`` (the caller ensures it)."""
    n, m = weights.shape
    if m == 0:
        return weights
    w = np.maximum(weights, _TINY_WEIGHT)
    order = np.argsort(-w, axis=1, kind="stable")
    sorted_w = np.take_along_axis(w, order, axis=1)
    tails = np.cumsum(sorted_w[:, ::-1], axis=1)[:, ::-1]  # sum of columns t.. (descending)
    capped = np.arange(m)[None, :]
    scale = (total[:, None] - capped * cap[:, None]) / tails
    # t columns capped is right when the scaled (t+1)-th largest fits under the cap.
    fits = scale * sorted_w <= cap[:, None]
    first = np.where(fits.any(axis=1), fits.argmax(axis=1), m - 1)
    s = scale[np.arange(n), first]
    filled = np.minimum(w * s[:, None], cap[:, None])
    return np.where(np.isfinite(filled), filled, cap[:, None])


def floor_fill(weights: np.ndarray, total: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Split each row's ``total`` in proportion to ``weights``, none below the row's
    ``floor``: the smallest are raised to it and the others scaled down to make up the
    rest (the mirror of `water_fill`). Rows need ``total >= n_columns * floor``."""
    n, m = weights.shape
    w = np.maximum(weights, _TINY_WEIGHT)
    order = np.argsort(w, axis=1, kind="stable")
    sorted_w = np.take_along_axis(w, order, axis=1)
    tails = np.cumsum(sorted_w[:, ::-1], axis=1)[:, ::-1]  # sum of columns t.. (ascending)
    raised = np.arange(m)[None, :]
    scale = (total[:, None] - raised * floor[:, None]) / tails
    fits = scale * sorted_w >= floor[:, None]
    first = np.where(fits.any(axis=1), fits.argmax(axis=1), m - 1)
    s = scale[np.arange(n), first]
    return np.maximum(w * s[:, None], floor[:, None])


def set_ranked_value(out, ranked, r: int, value) -> np.ndarray:
    """Give each row's r-th ranked class (0-based) ``value``, keep the ranks above it, and
    share the rest below it by `water_fill`; the value is moved into the feasible range."""
    rows = np.arange(len(out))
    k = out.shape[1]
    above = np.take_along_axis(out, ranked[:, :r], axis=1).sum(axis=1)
    free = np.maximum(1.0 - above, 0.0)
    ceiling = free if r == 0 else np.minimum(free, out[rows, ranked[:, r - 1]] * (1 - _MARGIN))
    lower = ranked[:, r + 1 :]
    m = k - r - 1
    if m == 0:
        out[rows, ranked[:, r]] = free
        return out
    floor = free / (1.0 + m * (1 - _MARGIN))  # below it, the rest cannot fit under the value
    v = np.clip(value, floor, np.maximum(ceiling, floor))
    out[rows, ranked[:, r]] = v
    filled = water_fill(np.take_along_axis(out, lower, axis=1), free - v, v * (1 - _MARGIN))
    np.put_along_axis(out, lower, filled, axis=1)
    return out


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
    reference_code : bool
        Follow Gupta's recalibrate.py where it differs from the paper's description: its
        float32 scores (`scipy_2020_softmax`, many tied at exactly 1.0), its float32
        cumulative score, and its interpolation of new scores (`reference_interpolation`,
        which swaps the weights of linear interpolation). The ``*_gupta_code`` methods.
    seed : int or None
        The order of tied calibration scores, which moves the fitted spline when many tie.
        None: with ``reference_code`` the order recalibrate.py's ``scores.argsort()`` gave
        them under the numpy 1.x of 2020 (its introsort, `calbench.numpy1_order`; numpy 2's
        SIMD sorts order ties otherwise), else sample order (a stable sort). An int draws a
        random order from it: a study of how far the order of ties can move the fit, not
        what any numpy did.
    """

    input_kind = "probabilities"
    _parameter_constraints = {"seed": NoneOr(Number(0, integer=True)), "reference_code": Flag()}

    def __init__(
        self,
        n_knots=6,
        ranks=1,
        within_top=None,
        pseudo_count=0.0,
        reference_code=False,
        seed=None,
    ):
        self.n_knots = n_knots
        self.ranks = ranks
        self.within_top = within_top
        self.pseudo_count = pseudo_count
        self.reference_code = reference_code
        self.seed = seed

    def _probabilities(self, logits):
        return scipy_2020_softmax(logits) if self.reference_code else softmax(logits)

    def _fit(self, logits, y):
        n_knots = int(self.n_knots)
        ranks = check_int(self.ranks, "ranks", "spline", minimum=0 if self.within_top else 1)
        probs = self._probabilities(logits)
        if ranks > probs.shape[1]:
            raise CalbenchError(f"spline: ranks={ranks} exceeds the {probs.shape[1]} classes.")
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
                probs[rows, ranked[:, r]], hits, n_knots, argsort, self.reference_code
            )
            self.maps_.append((scores, calibrated))
            self.knot_values_.append(knot_values)
        self.within_ = None
        if self.within_top is not None:
            w = check_int(self.within_top, "within_top", "spline", minimum=2)
            if w > probs.shape[1]:
                raise CalbenchError(f"spline: within_top={w} exceeds the {probs.shape[1]} classes.")
            summed = np.take_along_axis(probs, ranked[:, :w], axis=1).sum(axis=1)
            hits = (ranked[:, :w] == y[:, None]).any(axis=1).astype(np.float64)
            self.within_ = fit_gap_spline(summed, hits, n_knots, argsort, self.reference_code)[:2]

    def _tie_sort(self, n: int):
        """How the calibration scores are sorted (``seed``): the order of tied ones."""
        if self.seed is not None:
            drawn = np.random.default_rng(self.seed).permutation(n)
            return lambda scores: drawn[np.argsort(scores[drawn], kind="stable")]
        return numpy1_order.argsort if self.reference_code else stable_argsort

    def _apply(self, calibration_map, scores):
        sorted_scores, calibrated = calibration_map
        interpolate = reference_interpolation if self.reference_code else np.interp
        return np.clip(interpolate(scores, sorted_scores, calibrated), 0.0, 1.0)

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
        room = n_rest * (1 - _MARGIN)
        total = np.clip(target, w / (w + room), 1.0)  # w floors must fit in the total
        share = floor_fill(mem, total, (1.0 - total) / room)
        return _place(out, members, share, rest, total)

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
        high = top + (w - 1) * top * (1 - _MARGIN)
        a = n_rest * (1 - _MARGIN) / (w - 1)
        low = np.maximum(top, (1.0 + top * a) / (1.0 + a)) if n_rest else 1.0 + 0 * top
        total = np.clip(target, np.minimum(low, high), high)
        share = water_fill(
            np.take_along_axis(out, members, axis=1), total - top, top * (1 - _MARGIN)
        )
        return _place(out, members, share, rest, total)

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
        if self.reference_code:
            # Rows already sum to 1 up to rounding; renormalising would move tied calibrated
            # scores by an ulp apart, and the KS error reads every position of a tie.
            return out
        return out / out.sum(axis=1, keepdims=True)


def _place(out, members, share, rest, total) -> np.ndarray:
    """Put the top-w members' ``share`` in place; the remaining classes share 1 - total
    below the smallest member (`water_fill`)."""
    np.put_along_axis(out, members, share, axis=1)
    if rest.shape[1]:
        filled = water_fill(
            np.take_along_axis(out, rest, axis=1),
            np.maximum(1.0 - total, 0.0),
            share.min(axis=1) * (1 - _MARGIN),
        )
        np.put_along_axis(out, rest, filled, axis=1)
    return out


class CDFSpline(Calibrator):
    """Gupta et al.'s spline recalibration (`fit_gap_spline`) of class 1's probability
    against the label: CalArena's binary ``CDF-Spline`` (probmetrics'
    ``CDFSplineCalibrator``). A new score is mapped by linear interpolation between the
    calibration scores, the end values beyond them, and clipped to [0, 1]; with more
    classes each class's probability against the rest, rows renormalised, as CalArena
    applies its binary methods.

    Parameters
    ----------
    n_knots : int
        Equally spaced knots of the natural cubic spline (probmetrics' ``splines=6``).
    reference_code : bool
        Follow probmetrics' code where it differs: float32 probabilities
        (`calbench.calibrators.calarena.calarena_probabilities`) summed in float32, tied
        scores in the order numpy's default sort gives them, and beyond two classes a floor
        of 1e-30 in place of the clipping before the renormalisation (the method
        ``cdf_spline_calarena``). On tie-free scores both agree to 1e-5; where many scores
        tie (float32 probabilities at their floor) the order of the ties moves the spline,
        by up to 1e-3 on the tests' 4-class task.
    """

    input_kind = "probabilities"
    _certainty = "possible"
    _parameter_constraints = {"reference_code": Flag()}

    def __init__(self, n_knots=6, reference_code=False):
        self.n_knots = n_knots
        self.reference_code = reference_code

    def _probabilities(self, logits):
        if self.reference_code:
            from calbench.calibrators.calarena import calarena_probabilities

            return calarena_probabilities(logits)
        return softmax(logits)

    def _fit(self, logits, y):
        n_knots = check_int(self.n_knots, "n_knots", "cdf_spline", minimum=2)
        probs = self._probabilities(logits)
        options = {"argsort": np.argsort, "float32_sums": True} if self.reference_code else {}
        self.maps_ = [
            fit_gap_spline(probs[:, c], (y == c).astype(np.float64), n_knots, **options)[:2]
            for c in binary_columns(probs.shape[1])
        ]

    def _predict_proba(self, logits):
        probs = self._probabilities(logits)
        k = probs.shape[1]
        mapped = np.column_stack(
            [
                np.interp(probs[:, c], scores, values)
                for c, (scores, values) in zip(binary_columns(k), self.maps_, strict=True)
            ]
        )
        if k > 2 and self.reference_code:
            # probmetrics' one-vs-rest floors each class at 1e-30, then renormalises.
            mapped = np.clip(mapped, 1e-30, None)
        else:  # the spline's overshoot beyond the calibration scores' range
            mapped = np.clip(mapped, 0.0, 1.0)
        return class_probabilities(mapped, k)
