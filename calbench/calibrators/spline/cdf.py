"""CalArena's binary ``CDF-Spline``: Gupta et al.'s gap spline (`calbench.calibrators.spline.gupta`)
of each class's probability against the label."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import binary_columns, class_probabilities
from calbench.calibrators.spline.gupta import fit_gap_spline
from calbench.errors import check_int
from calbench.simplex import softmax


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

    probmetrics' own arithmetic (float32 probabilities summed in float32, numpy's default
    order of ties, a floor of 1e-30 beyond two classes) is the pack ``calarena2026``'s
    ``cdf_spline_calarena``, a subclass overriding the hooks `_probabilities`,
    ``_fit_options`` and `_bounded_outputs`.
    """

    input_kind = "probabilities"
    _certainty = "possible"
    #: `fit_gap_spline`'s options (how ties are ordered, the sums' precision).
    _fit_options: dict = {}

    def __init__(self, n_knots=6):
        self.n_knots = n_knots

    def _probabilities(self, logits):
        """The probabilities the splines read."""
        return softmax(logits)

    def _bounded_outputs(self, mapped, k):
        """The maps' outputs before the rows are formed: clipped into [0, 1] (the spline's
        overshoot beyond the calibration scores' range)."""
        return np.clip(mapped, 0.0, 1.0)

    def _fit(self, logits, y):
        n_knots = check_int(self.n_knots, "n_knots", "cdf_spline", minimum=2)
        probs = self._probabilities(logits)
        options = self._fit_options
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
        return class_probabilities(self._bounded_outputs(mapped, k), k)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "cdf_spline": (CDFSpline, {}),
}
