"""Top-versus-all calibration of binary maps (Le Coz et al., NeurIPS 2024).

One-vs-rest fits k binary maps, one per class column, and renormalises their outputs.
Top-versus-all fits one binary map to the question the confidence answers: the top-label
confidence ``c = max_j p_j`` against ``1[argmax p = y]``. Every sample feeds the one map, so
it sees n points where one-vs-rest's rare classes see a handful.

The reference (allglc/tva-calibration) reports only the calibrated confidence ``c'`` next
to the original prediction. calbench's calibrators return whole rows, so the top class
gets ``c'`` and the other classes share ``1 - c'`` in proportion to their probabilities,
none of them above ``c'`` (water-filling, `share_below`). The row's arg max is then the
original prediction and its maximum is ``c'``, so accuracy and every confidence metric
read what the reference reports. Only where ``c' < 1/k`` can no row keep the top class
(the others must hold more than ``c'`` between them); there the others share ``1 - c'``
in plain proportion and the arg max moves.

The scaling maps' top-versus-all variants are the same maps fitted to the top-label binary
cross-entropy instead: ``make_calibrator("ts", criterion="top_label_bce")``, or
``method=tva_ts`` / ``tva_vs`` / ``tva_ms_odir`` in a run.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.binary import OneVsRestCalibrator
from calbench.calibrators.binning.histogram import HistogramBinning
from calbench.calibrators.bounds import PseudoCountBound
from calbench.calibrators.constraints import Choice
from calbench.calibrators.isotonic.regression import IsotonicCalibrator
from calbench.calibrators.scaling.beta import BetaCalibrator
from calbench.simplex import softmax

#: The binary maps TvA wraps: their one-vs-rest classes, whose per-column fit it reuses.
BINARY_MAPS: dict[str, type[OneVsRestCalibrator]] = {
    "isotonic": IsotonicCalibrator,
    "histogram": HistogramBinning,
    "beta": BetaCalibrator,
}


class TopVersusAll(PseudoCountBound):
    """A binary calibration map of the top-label confidence (Le Coz et al. 2024).

    The map is fitted on ``(max_j p_j, 1[argmax p = y])`` of the calibration data; at
    prediction the top class's probability becomes the map's output ``c'`` and the other
    classes share ``1 - c'`` in proportion to their probabilities, none above ``c'``
    (module docstring).

    Parameters
    ----------
    binary : {"isotonic", "histogram", "beta"}
        The binary map: scikit-learn's isotonic regression, histogram binning (the
        reference's ``HB_tva``) or beta calibration, each as calbench's one-vs-rest class
        fits one column.
    n_bins : int
        Histogram binning only: the number of bins (the reference uses 15).
    binning : {"equal_size", "equal_width"}
        Histogram binning only: equal-mass bins of the calibration confidences (the
        reference's ``HB_tva_eqmass``) or equal-width bins of [0, 1] (``HB_tva_eqsize``).
        Isotonic and equal-width maps equal netcal's, which the reference calls; netcal
        cuts equal-mass bins at interpolated quantiles where calbench's end at calibration
        scores, so about 1% of test confidences (those next to an edge) land in the
        neighbouring bin.
    pseudo_count : float
        Smooth the predictions as if this many evenly labelled samples were added to the
        calibration set (`calbench.calibrators.bounds`): at 0 (the reference's) a top bin
        or isotonic block of correct rows gives a confidence of exactly 1; the methods
        ``tva_histbin`` and ``tva_isotonic`` use 1.
    """

    input_kind = "probabilities"

    _parameter_constraints = {
        "binary": Choice(*BINARY_MAPS),
        "binning": Choice("equal_size", "equal_width"),
    }

    def __init__(self, binary="isotonic", n_bins=15, binning="equal_size", pseudo_count=0.0):
        self.binary = binary
        self.n_bins = n_bins
        self.binning = binning
        self.pseudo_count = pseudo_count

    def certainty(self) -> str:
        """Beta calibration's sigmoid never reaches 0 or 1; binning and isotonic maps can."""
        if self.binary == "beta" and self.pseudo_count <= 0:
            return "never"
        return super().certainty()

    def _binary_map(self) -> OneVsRestCalibrator:
        cls = BINARY_MAPS[self.binary]
        if cls is HistogramBinning:
            return cls(n_bins=self.n_bins, binning=self.binning)
        return cls()

    def _fit(self, logits, y):
        probs = softmax(logits)
        top = probs.argmax(axis=1)
        confidence = probs[np.arange(len(y)), top]
        self.map_ = self._binary_map()
        self.fitted_ = self.map_._fit_binary(confidence, (top == y).astype(np.float64))

    def calibrated_confidence(self, logits) -> np.ndarray:
        """``c'``: the map's output at each row's top-label confidence, shape (n_samples,)."""
        return self._confidence(softmax(np.asarray(logits, dtype=np.float64)).max(axis=1))

    def _confidence(self, confidence):
        return np.clip(self.map_._apply_binary(self.fitted_, confidence), 0.0, 1.0)

    def _predict_proba(self, logits):
        probs = softmax(logits)
        rows = np.arange(len(probs))
        top = probs.argmax(axis=1)
        calibrated = self._confidence(probs[rows, top])
        out = share_below(probs, top, 1.0 - calibrated, calibrated * (1.0 - _MARGIN))
        out[rows, top] = calibrated
        return out


#: How far below ``c'`` (relatively) a capped class stays, so the arg max stays the top class.
_MARGIN = 1e-9


def share_below(probs: np.ndarray, top: np.ndarray, total: np.ndarray, cap: np.ndarray):
    """``total`` shared among each row's classes other than ``top``, in proportion to their
    ``probs`` (evenly where they are all 0), none above ``cap``: ``min(cap, alpha p_j)`` by
    water-filling. With the m largest at the cap, ``alpha = (total - m cap) / (the other
    probabilities' sum)``, and the first m whose next class stays under the cap is the one.
    Where even every class at the cap holds less than ``total`` (``cap`` below
    ``total / (k - 1)``), the plain proportional share. The ``top`` column comes back 0."""
    n, k = probs.shape
    rows = np.arange(n)
    weights = probs.copy()
    weights[rows, top] = 0.0
    empty = weights.sum(axis=1) == 0
    weights[empty] = 1.0
    weights[rows[empty], top[empty]] = 0.0
    # Shares of 1: where the others' probabilities are subnormal, total / their sum would
    # overflow to inf (and inf * 0 to nan).
    weights /= weights.sum(axis=1, keepdims=True)
    order = np.argsort(-weights, axis=1)[:, : k - 1]  # the top class (0) sorts last
    ranked = np.take_along_axis(weights, order, axis=1)
    tail = ranked[:, ::-1].cumsum(axis=1)[:, ::-1]  # the weights from rank m on
    at_cap = np.arange(k - 1)[None, :]
    with np.errstate(over="ignore"):  # a subnormal tail: alpha inf, and that m never fits
        alpha = (total[:, None] - at_cap * cap[:, None]) / np.where(tail > 0, tail, 1.0)
    fits = (alpha * ranked <= cap[:, None]) & (tail > 0)
    found = fits.any(axis=1)
    scale = np.where(found, alpha[rows, fits.argmax(axis=1)], total)
    limit = np.where(found, cap, np.inf)
    return np.minimum(weights * scale[:, None], limit[:, None])


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "tva": (TopVersusAll, {}),
}
