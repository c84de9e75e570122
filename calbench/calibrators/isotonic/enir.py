"""ENIR, the ensemble of near-isotonic regressions (Naeini and Cooper 2016), as netcal computes
it and CalArena runs it."""

from __future__ import annotations

import contextlib
import importlib
import io
import warnings

import numpy as np
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import binary_columns, class_probabilities
from calbench.calibrators.float32 import calarena_probabilities
from calbench.calibrators.optional import optional_module


class NetcalENIR(Calibrator):
    """ENIR, the ensemble of near-isotonic regressions (Naeini and Cooper 2016), as netcal's
    ``ENIR`` and as CalArena runs it (probmetrics' ``NetcalENIRCalibrator``): on class 1's
    float32 probability; where netcal's fit fails (it does on separable data, AUC = 1),
    isotonic regression instead, with a warning, and ``fallback_`` says so. With more
    classes one ENIR per class against the rest, rows renormalised, clipped into [0, 1].

    Parameters
    ----------
    None
    """

    input_kind = "probabilities"
    _certainty = "possible"

    def _fit(self, logits, y):
        optional_module("netcal")
        enir = importlib.import_module("netcal.binning.ENIR")
        probs = calarena_probabilities(logits)
        self.models_, self.fallback_ = [], []
        for c in binary_columns(probs.shape[1]):
            scores, hits = probs[:, c], (y == c).astype(np.int64)
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # netcal prints each fit's path
                    model, fallback = enir.ENIR().fit(scores, hits), False
            except Exception as exc:  # noqa: BLE001 (CalArena falls back on any failure)
                warnings.warn(
                    f"netcal's ENIR failed on class {c} ({type(exc).__name__}: {exc}); "
                    "isotonic regression instead, as CalArena falls back.",
                    RuntimeWarning,
                    stacklevel=3,
                )
                model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
                model, fallback = model.fit(scores, hits), True
            self.models_.append(model)
            self.fallback_.append(fallback)

    def _predict_proba(self, logits):
        probs = calarena_probabilities(logits)
        k = probs.shape[1]
        mapped = np.column_stack(
            [
                model.predict(probs[:, c]) if fallback else model.transform(probs[:, c])
                for c, model, fallback in zip(
                    binary_columns(k), self.models_, self.fallback_, strict=True
                )
            ]
        ).astype(np.float64)
        return class_probabilities(np.clip(np.nan_to_num(mapped), 0.0, 1.0), k)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "enir": (NetcalENIR, {}),
}
