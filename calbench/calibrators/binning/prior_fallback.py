"""Histogram binning as probmetrics' ``BinaryHistogramBinningCalibrator`` (CalArena's), an
empty bin predicting the class's frequency."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.constraints import Choice
from calbench.calibrators.float32 import TINY32, OneVsRestFloor


class PriorFallbackBinning(OneVsRestFloor):
    """Histogram binning as probmetrics' ``BinaryHistogramBinningCalibrator``, one-vs-rest.

    ``strategy="uniform"``: edges ``linspace(0, 1, n_bins + 1)``; ``"quantile"``: the
    distinct quantiles of the class's calibration scores at those levels. A score falls in
    ``digitize(score, edges) - 1`` clipped to the bins (right-open bins, 1.0 in the last);
    an empty bin predicts the class's calibration frequency.

    Parameters
    ----------
    n_bins : int
    strategy : {"uniform", "quantile"}
    two_class_floor : float
        A two-class task's floor (see `OneVsRestFloor`; 1e-30 before 2026-11-28).
    """

    _parameter_constraints = {"strategy": Choice("uniform", "quantile")}

    def __init__(self, n_bins=10, strategy="uniform", two_class_floor=TINY32):
        self.n_bins = n_bins
        self.strategy = strategy
        self.two_class_floor = two_class_floor

    def _fit_binary(self, scores, outcomes):
        n_bins = int(self.n_bins)
        if self.strategy == "uniform":
            edges = np.linspace(0.0, 1.0, n_bins + 1)
        else:
            edges = np.unique(np.quantile(scores, np.linspace(0.0, 1.0, n_bins + 1)))
            if len(edges) == 1:
                edges = np.array([0.0, 1.0])
        bins = np.clip(np.digitize(scores, edges) - 1, 0, len(edges) - 2)
        sums = np.bincount(bins, weights=outcomes, minlength=len(edges) - 1)
        counts = np.bincount(bins, minlength=len(edges) - 1)
        values = np.full(len(edges) - 1, outcomes.mean())
        np.divide(sums, counts, out=values, where=counts > 0)
        return edges, values

    def _apply_binary(self, fitted, scores):
        edges, values = fitted
        return values[np.clip(np.digitize(scores, edges) - 1, 0, len(edges) - 2)]


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "histbin_prior": (PriorFallbackBinning, {}),
}
