"""Calibrators with nothing to learn: the uncalibrated baseline and the known true map."""

from __future__ import annotations

from calbench.calibrators.base import Calibrator
from calbench.errors import CalbenchError
from calbench.simplex import softmax


class Uncalibrated(Calibrator):
    """The classifier's own probabilities, ``softmax(logits)`` (column "uncal").

    Parameters
    ----------
    None
    """

    #: The classifier's own scores: a logit gap beyond about 28 is a confidence of 1.
    _certainty = "possible"
    _certainty_source = "They are the classifier's own scores."

    def _fit(self, logits, y):
        pass

    def _predict_proba(self, logits):
        return softmax(logits)


class TrueMapCalibrator(Calibrator):
    """The perfectly calibrated predictions ``c(p)`` where the true map is known.

    Column "cal" of Valk Table 1: a reference, not a method (only synthetic data have it).

    Parameters
    ----------
    true_map : callable
        ``true_map(p) -> E[Y | P = p]``, e.g. ``Dataset.true_map``.
    """

    run_inputs = ("true_map",)

    input_kind = "probabilities"

    def __init__(self, true_map=None):
        self.true_map = true_map

    def _fit(self, logits, y):
        if self.true_map is None:
            raise CalbenchError(
                "method=true_map needs a data set whose true calibration map is known "
                "(dataset=synthetic_dirichlet); this data set has none."
            )

    def _predict_proba(self, logits):
        return self.true_map(softmax(logits))


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "uncal": (Uncalibrated, {}),
    "true_map": (TrueMapCalibrator, {}),
}
