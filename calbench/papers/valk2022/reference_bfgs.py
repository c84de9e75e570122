"""Vector scaling as experiments_dnn's scipy ``VectorScaling`` fits it (Valk's VS).

Kull et al.'s ``cal_methods.VectorScaling`` (copied into Valk's ``helpers/vec_scaling.py``)
minimises scikit-learn's ``log_loss`` (probabilities clipped to ``[1e-15, 1 - 1e-15]`` and
renormalised, as scikit-learn did then) of ``softmax(z diag(w) + b)`` with scipy's BFGS,
its gradient by finite differences and at most 100 iterations, from ``w = 1, b = 0``;
their softmax subtracts the largest logit of the whole array. The optimiser stops where
that gradient estimate stalls, not at the optimum that calbench's ``vs`` reaches, so its
map is a little different; this calibrator follows the procedure to the letter and is
deterministic.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import COUNT
from calbench.simplex import global_max_softmax, softmax


class BFGSVectorScaling(Calibrator):
    """``softmax(w * z + b)`` fitted by scipy's BFGS as experiments_dnn's scipy code does.

    Parameters
    ----------
    max_iter : int
        BFGS's iteration limit (theirs: 100).
    """

    _parameter_constraints = {"max_iter": COUNT}

    def __init__(self, max_iter=100):
        self.max_iter = max_iter

    def _scores(self, logits, x):
        k = logits.shape[1]
        # Their float32 logits times a float64 diagonal matrix: float64 from here on.
        return np.dot(logits.astype(np.float32), np.diag(x[:k])) + x[k:]

    def _fit(self, logits, y):
        k = logits.shape[1]
        rows = np.arange(len(y))

        def loss(x):
            p = np.clip(global_max_softmax(self._scores(logits, x)), 1e-15, 1 - 1e-15)
            p /= p.sum(axis=1, keepdims=True)
            return -np.mean(np.log(p[rows, y]))

        start = np.concatenate([np.ones(k), np.zeros(k)])
        result = minimize(loss, start, method="BFGS", options={"maxiter": self.max_iter})
        self.coef_, self.intercept_ = result.x[:k].copy(), result.x[k:].copy()
        self.n_iter_ = int(result.nit)

    def _predict_proba(self, logits):
        # Each row's own maximum: the same probabilities wherever theirs are finite, and
        # rows far below the array's largest logit do not come out as 0 / 0.
        return softmax(self._scores(logits, np.concatenate([self.coef_, self.intercept_])))
