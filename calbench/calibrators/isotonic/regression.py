"""Isotonic regression one-vs-rest (Zadrozny and Elkan 2002), with the pseudo-count bound."""

from __future__ import annotations

from sklearn.isotonic import IsotonicRegression

from calbench.calibrators.binary import OneVsRestCalibrator
from calbench.calibrators.bounds import PseudoCountBound


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


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "isotonic": (IsotonicCalibrator, {}),
}
