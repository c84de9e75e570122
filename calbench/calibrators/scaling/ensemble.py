"""Mix-n-Match calibrators (Zhang et al. 2020), as compared in Hoki Table 2.

- ``ets``: ensemble temperature scaling,
  :math:`w_1\\,\\sigma(z/t) + w_2\\,\\sigma(z) + w_3\\,\\frac1k`, with t fitted by temperature
  scaling and w on the simplex, both on the mean squared error (Zhang et al.'s
  ``ets_calibrate``; the error is quadratic in w, so w is its exact minimum, where their
  code runs SLSQP) or, with ``criterion: nll``, both on the log-loss (their ``ll_w``).
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
from calbench.calibrators.constraints import Choice
from calbench.calibrators.scaling.temperature import TemperatureScaling
from calbench.simplex import softmax


class EnsembleTemperatureScaling(Calibrator):
    r"""Ensemble temperature scaling (Zhang et al. 2020, ``ets_calibrate``):
    :math:`w_1\,\sigma(z/t) + w_2\,\sigma(z) + w_3/k` with ``t`` fitted by temperature
    scaling and ``w`` on the simplex, both on ``criterion``; ``temperature_`` and
    ``weights_`` are fitted. On ``mse`` the weights are the exact minimum of a quadratic
    (`simplex_least_squares`); on ``nll`` SLSQP minimises the log-loss, as Zhang et al.'s
    ``ll_w``. (Before 2026-11-29 the weights minimised the squared error on ``nll`` too.)

    Parameters
    ----------
    criterion : str
        What ``t`` and ``w`` minimise: ``mse`` (Zhang et al.'s choice) or ``nll``.
    """

    run_inputs = ("criterion",)
    _parameter_constraints = {"criterion": Choice("mse", "nll")}

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
        if self.criterion == "mse":
            self.weights_ = simplex_least_squares(*_squared_error_terms(parts, y))
        else:
            self.weights_ = _log_loss_weights(parts, y)

    def _predict_proba(self, logits):
        return np.tensordot(self.weights_, self._components(logits), axes=1)


def _squared_error_terms(parts, y) -> tuple[np.ndarray, np.ndarray]:
    """The mean squared error of the mixture ``w @ parts`` against the one-hot labels is
    the quadratic ``w' A w - 2 b' w + const`` in the weights: its (A, b), from one pass over
    the three components, so that the weights need no pass of their own."""
    n, k = parts.shape[1:]
    flat = parts.reshape(3, -1)
    gram = flat @ flat.T / (n * k)
    at_label = parts[:, np.arange(n), y].sum(axis=1) / (n * k)
    return gram, at_label


def simplex_least_squares(gram, linear) -> np.ndarray:
    """The weights on the probability simplex that minimise ``w' A w - 2 b' w`` for a
    positive semi-definite ``A``, exactly: the objective is convex, so its minimum on the
    simplex is the minimum on one face, found by solving every face's equality-constrained
    problem (its KKT system) and keeping the best point that lies in the simplex. Zhang et
    al.'s code asks SLSQP for it (tol 1e-12), which stops within about 1e-9 of this."""
    m = len(linear)

    def value(w):
        return float(w @ gram @ w - 2 * linear @ w)

    best, best_value = None, np.inf
    for mask in range(1, 2**m):
        face = [i for i in range(m) if mask >> i & 1]
        kkt = np.zeros((len(face) + 1, len(face) + 1))
        kkt[:-1, :-1] = 2 * gram[np.ix_(face, face)]
        kkt[:-1, -1] = kkt[-1, :-1] = 1.0
        rhs = np.append(2 * linear[face], 1.0)
        # lstsq: on a face where two components coincide (t = 1) the system is singular,
        # and any of its solutions is the face's minimum.
        solution = np.linalg.lstsq(kkt, rhs, rcond=None)[0][:-1]
        if solution.min() < -1e-12:
            continue  # the face's minimum lies outside the simplex
        w = np.zeros(m)
        w[face] = np.clip(solution, 0.0, None)
        w /= w.sum()
        if (at_w := value(w)) < best_value:
            best, best_value = w, at_w
    return best


def _log_loss_weights(parts, y) -> np.ndarray:
    """Zhang et al.'s ``ll_w`` weights (criterion ``nll``): the mean negative log of the
    mixture's probability of the label, convex in w, by SLSQP on the simplex as their code."""
    at_label = parts[:, np.arange(parts.shape[1]), y]  # (3, n)

    def loss(w):
        mix = np.maximum(w @ at_label, 1e-300)
        return float(-np.log(mix).mean()), -(at_label / mix).mean(axis=1)

    result = minimize(
        loss,
        np.array([1.0, 0.0, 0.0]),
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * 3,
        tol=1e-12,
        constraints={"type": "eq", "fun": lambda w: w.sum() - 1.0},
    )
    w = np.clip(result.x, 0.0, None)
    return w / w.sum()


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "ets": (EnsembleTemperatureScaling, {}),
}
