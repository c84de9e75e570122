"""Popordanoska et al.'s Dirichlet kernel as a Nadaraya-Watson estimate of the label
(CalArena's Kernel)."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import POSITIVE, AutoOr
from calbench.calibrators.float32 import calarena_probabilities


class DirichletKernel(Calibrator):
    r"""Kernel calibration as Popordanoska et al.'s estimator (probmetrics' ``KernelCalibrator``,
    CalArena's Kernel): the Nadaraya-Watson mean of the calibration labels under a Dirichlet
    kernel centred on each calibration point,

    .. math:: \hat p_j(p) = \frac{\sum_i K(p; p_i)\,[y_i = j]}{\sum_i K(p; p_i)},\qquad
        K(p; p_i) = \mathrm{Dir}(p;\ p_i / h + 1),

    with every probability clamped into [1e-10, 1 - 1e-10] first. ``bandwidth="auto"``
    takes Scott's rule, ``n^{-2/(d+4)}``, ``d = k - 1``. Valk's ``kernel_dir`` corrects ``p`` by the
    weighted calibration error instead.

    Parameters
    ----------
    bandwidth : float or "auto"
        h; "auto" is Scott's rule above.
    clamp : float
        Probabilities are clamped into [clamp, 1 - clamp] before the log.
    """

    input_kind = "probabilities"
    _parameter_constraints = {"bandwidth": AutoOr(POSITIVE)}
    # A class no nearby calibration point has gets a weight that underflows to 0.
    _certainty = "possible"

    def __init__(self, bandwidth="auto", clamp=1e-10):
        self.bandwidth = bandwidth
        self.clamp = clamp

    def _fit(self, logits, y):
        probs = np.clip(
            calarena_probabilities(logits).astype(np.float64), self.clamp, 1 - self.clamp
        )
        n, k = probs.shape
        self.bandwidth_ = (
            n ** (-2.0 / ((k - 1) + 4.0)) if self.bandwidth == "auto" else float(self.bandwidth)
        )
        alphas = probs / self.bandwidth_ + 1.0
        self.exponents_ = alphas - 1.0
        self.log_beta_ = gammaln(alphas).sum(axis=1) - gammaln(alphas.sum(axis=1))
        self.one_hot_ = np.eye(k)[y]

    def _predict_proba(self, logits):
        log_z = np.log(
            np.clip(calarena_probabilities(logits).astype(np.float64), self.clamp, 1 - self.clamp)
        )
        out = np.empty((len(log_z), self.n_classes_))
        chunk = max(1, 4_000_000 // len(self.log_beta_))
        for start in range(0, len(log_z), chunk):
            log_w = log_z[start : start + chunk] @ self.exponents_.T - self.log_beta_
            log_w -= log_w.max(axis=1, keepdims=True)
            w = np.exp(log_w)
            out[start : start + chunk] = (w @ self.one_hot_) / w.sum(axis=1, keepdims=True)
        return out


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "kernel_nw": (DirichletKernel, {}),
}
