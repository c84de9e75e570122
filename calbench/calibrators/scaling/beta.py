"""Beta calibration (Kull et al. 2017), one-vs-rest."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

from calbench.calibrators.binary import OneVsRestCalibrator
from calbench.simplex import TINY


class BetaCalibrator(OneVsRestCalibrator):
    r"""Beta calibration per class (Kull et al. 2017), the three-parameter family:

    .. math:: \hat c(p) = \sigma(a \ln p - b \ln(1 - p) + c), \quad a, b \ge 0

    fitted as a logistic regression on :math:`(\ln p, -\ln(1-p))`. As in the betacal package:
    scores are clipped to [eps, 1 - eps] (float64 machine epsilon) and, when ``a`` comes out
    negative, it is fixed at 0 and ``b`` refitted alone (else the same for a negative ``b``).
    One map per class (one-vs-rest), rows renormalised; checked against betacal's
    ``BetaCalibration("abm")`` in tests/calibrators/test_nonparametric.py.

    Parameters
    ----------
    None
    """

    def _features(self, scores):
        eps = np.finfo(np.float64).eps
        s = np.clip(scores, eps, 1 - eps)
        return np.column_stack([np.log(s), -np.log1p(-s)])

    def _fit_binary(self, scores, outcomes):
        x = self._features(scores)
        if outcomes.min() == outcomes.max():
            # A class absent (or alone) in the fold: the constant frequency, kept off 0 and 1.
            rate = float(np.clip(outcomes.mean(), TINY, 1 - 1e-12))
            return np.zeros(2), np.log(rate / (1 - rate))
        coef, intercept = _logistic(x, outcomes)
        for negative, other in ((0, 1), (1, 0)):
            if coef[negative] < 0:
                alone, intercept = _logistic(x[:, [other]], outcomes)
                coef = np.zeros(2)
                coef[other] = alone[0]
                break
        return coef, intercept

    def _apply_binary(self, fitted, scores):
        coef, intercept = fitted
        z = self._features(scores) @ coef + intercept
        return 1.0 / (1.0 + np.exp(-z))


def _logistic(x, outcomes):
    """Unregularised (C = 1e11, as betacal) logistic regression: coefficients, intercept."""
    model = LogisticRegression(C=1e11, tol=1e-10, max_iter=10_000).fit(x, outcomes)
    return model.coef_[0].copy(), float(model.intercept_[0])


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "beta": (BetaCalibrator, {}),
}
