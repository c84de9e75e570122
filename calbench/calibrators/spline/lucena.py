"""Lucena's spline calibration (splinecalib), as CalArena runs it."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.float32 import calarena_probabilities
from calbench.calibrators.optional import optional_module


class LucenaSpline(Calibrator):
    """Lucena's spline calibration (splinecalib's ``SplineCalib`` with its defaults, as
    CalArena's Spline): penalised logistic regression on a natural-spline basis of the
    log-odds, one-vs-rest for several classes, the penalty chosen by 5-fold CV. Gupta et
    al.'s spline (``spline``) recalibrates the top-1 confidence instead.

    Parameters
    ----------
    None
    """

    input_kind = "probabilities"
    _certainty = "possible"

    def _fit(self, logits, y):
        probs = calarena_probabilities(logits)
        if len(np.unique(probs)) < 3:  # splinecalib fails on fewer distinct scores
            self.model_ = None
            return
        self.model_ = optional_module("splinecalib").SplineCalib()
        self.model_.fit(probs, y)

    def _predict_proba(self, logits):
        probs = calarena_probabilities(logits)
        if self.model_ is None:
            return probs.astype(np.float64)
        out = np.asarray(self.model_.calibrate(probs), dtype=np.float64)
        return out / out.sum(axis=1, keepdims=True)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "spline_lucena": (LucenaSpline, {}),
}
