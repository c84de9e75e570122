"""Bayesian binning into quantiles (Naeini et al. 2015), as netcal computes it."""

from __future__ import annotations

import importlib

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.float32 import calarena_probabilities
from calbench.calibrators.optional import optional_module, quiet_tqdm


class NetcalBBQ(Calibrator):
    """Bayesian binning into quantiles (Naeini et al. 2015) as netcal's ``BBQ``: for several
    classes, one BBQ per class against the rest, rows renormalised, clipped into [0, 1].

    Parameters
    ----------
    None
    """

    input_kind = "probabilities"
    _certainty = "possible"

    def _fit(self, logits, y):
        optional_module("netcal")
        bbq = importlib.import_module("netcal.binning.BBQ")

        with quiet_tqdm(bbq):
            self.model_ = bbq.BBQ().fit(calarena_probabilities(logits), y)

    def _predict_proba(self, logits):
        out = np.asarray(self.model_.transform(calarena_probabilities(logits)), dtype=np.float64)
        # Two classes: netcal returns the second class's probability alone.
        out = np.nan_to_num(np.column_stack([1 - out, out]) if out.ndim == 1 else out)
        sums = out.sum(axis=1, keepdims=True)
        # netcal divides by the row sum itself: a row of zeros comes back as NaN.
        return np.where(sums > 0, out / np.where(sums > 0, sums, 1.0), 1.0 / out.shape[1])


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "bbq": (NetcalBBQ, {}),
}
