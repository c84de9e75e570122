"""Mix-n-Match calibrators (Zhang et al. 2020), as compared in Hoki Table 2.

- ``ets``: ensemble temperature scaling,
  :math:`w_1\\,\\sigma(z/t) + w_2\\,\\sigma(z) + w_3\\,\\frac1k`, with t fitted by temperature
  scaling on the mean squared error and w on the simplex by SLSQP on the same error
  (Zhang et al.'s ``ets_calibrate``).
- ``irm``: multi-class isotonic regression, one increasing map fitted to every (p_ij, 1[y_i = j])
  pair at once; ``irova`` (the ``isotonic`` calibrator with ``tie_break``) is one map per class.
  Both add 1e-9 p before the output so that equal isotonic values keep the original order
  (Zhang et al.'s code does; otherwise ties can change the predicted class), and, unlike that
  code, renormalise the rows onto the simplex.
- ``irova_ts`` is the composition ``ts`` then ``isotonic`` (conf/method/irova_ts.yaml).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from calbench.calibrators.base import Calibrator
from calbench.calibrators.scaling.temperature import TemperatureScaling
from calbench.simplex import softmax


class EnsembleTemperatureScaling(Calibrator):
    r"""Ensemble temperature scaling (Zhang et al. 2020, ``ets_calibrate``):
    :math:`w_1\,\sigma(z/t) + w_2\,\sigma(z) + w_3/k` with ``t`` fitted by temperature
    scaling and ``w`` on the simplex by SLSQP, both on ``criterion``; ``temperature_`` and
    ``weights_`` are fitted.

    Parameters
    ----------
    criterion : str
        What ``t`` and ``w`` minimise: ``mse`` (Zhang et al.'s choice) or ``nll``.
    """

    run_inputs = ("criterion",)

    def __init__(self, criterion="mse"):
        self.criterion = criterion

    def _components(self, logits):
        k = logits.shape[1]
        return np.stack(
            [softmax(logits / self.temperature_), softmax(logits), np.full(logits.shape, 1.0 / k)]
        )

    def _fit(self, logits, y):
        self.temperature_ = TemperatureScaling(criterion=self.criterion).fit(logits, y).temperature_
        parts = self._components(logits)
        one_hot = np.eye(logits.shape[1])[y]

        def error(w):
            return float(((np.tensordot(w, parts, axes=1) - one_hot) ** 2).mean())

        result = minimize(
            error,
            np.array([1.0, 0.0, 0.0]),
            method="SLSQP",
            bounds=[(0.0, 1.0)] * 3,
            tol=1e-12,
            constraints={"type": "eq", "fun": lambda w: w.sum() - 1.0},
        )
        self.weights_ = np.clip(result.x, 0.0, None) / np.clip(result.x, 0.0, None).sum()

    def _predict_proba(self, logits):
        return np.tensordot(self.weights_, self._components(logits), axes=1)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "ets": (EnsembleTemperatureScaling, {}),
}
