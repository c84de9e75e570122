"""Valk's float32 pipeline as his code runs it (msc-knn-cal), shared by the procedures that
replay his calibrators (`reference_forest`, `reference_knn`).

- **Probabilities.** His ``softmax`` (helpers/temp_scaling.py): float32, minus the largest
  logit of the whole array, not of each row, so small probabilities underflow to 0 and a
  row's probabilities depend (in float32 rounding) on the rows predicted with it.
- **Temperature.** His ``TemperatureScaling`` (Kull et al.'s experiments_dnn code): scipy's
  BFGS from 1 on scikit-learn's log-loss as it clipped then; the scaled probabilities are
  again his float32 softmax.
- **Output.** His ``force_p_to_simplex``: negatives become ``crop``, values above 1 become
  ``1 - crop``, rows renormalised (crop 1e-4 up to 10 classes, else 1e-6).
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.scoring import log_loss
from calbench.simplex import global_max_softmax, softmax


def valk_temperature(logits, y) -> float:
    """The temperature of his TemperatureScaling (experiments_dnn's, helpers/temp_scaling.py):
    scipy's BFGS from 1 with numeric gradients, at most 50 iterations, on scikit-learn's
    log-loss as it was then (``clip=1e-15``) of the whole-array softmax of the float32 logits
    over the temperature (a one-element float64 array, so the scores are float64)."""
    from scipy.optimize import minimize

    loss = _ts_loss(logits, y)
    return float(minimize(loss, x0=1, options={"maxiter": 50}, method="BFGS").x[0])


def _ts_loss(logits, y):
    """His TS objective of a one-element float64 array of the temperature."""
    logits = np.asarray(logits).astype(np.float32)

    def loss(t):
        scores = logits / t
        with np.errstate(invalid="ignore"):
            probs = global_max_softmax(scores)
        return log_loss(_own_max_where_lost(probs, scores), y, clip=1e-15)

    return loss


#: His BFGS's gradient estimate (scipy 1.6, as his environment.yml pins it): the forward
#: difference with this absolute step; it stops at the first iterate whose estimate is at
#: most `BFGS_GTOL` in size.
BFGS_STEP = 1.4901161193847656e-08
BFGS_GTOL = 1e-5


def bfgs_gradient(loss, t: float) -> float:
    """The forward difference his BFGS steers and stops by."""
    return (loss(np.array([t + BFGS_STEP])) - loss(np.array([t]))) / BFGS_STEP


def accepted_temperatures(logits, y) -> tuple[float, float, float]:
    """(lowest, centre, highest) of the temperatures his TS's BFGS accepts: where its
    gradient estimate (`bfgs_gradient`) is within ``[-BFGS_GTOL, BFGS_GTOL]``, an interval
    around the zero of the estimate (the loss is convex in the temperature), each end found
    by Brent's method to 1e-9. Which point of it a run returns is set by the iterates' path,
    not by the stopping test."""
    from scipy.optimize import brentq

    loss = _ts_loss(logits, y)
    start = valk_temperature(logits, y)

    def root(level):
        width = 1e-3
        while bfgs_gradient(loss, start - width) >= level:
            width *= 2
        low = start - width
        width = 1e-3
        while bfgs_gradient(loss, start + width) <= level:
            width *= 2
        return brentq(lambda t: bfgs_gradient(loss, t) - level, low, start + width, xtol=1e-9)

    return root(-BFGS_GTOL), root(0.0), root(BFGS_GTOL)


def accepted_temperature(logits, y, stop: float) -> float:
    """The temperature ``stop`` of the way from the centre of `accepted_temperatures` to
    its upper end (``stop`` > 0) or its lower end (< 0); ``stop`` in [-1, 1]."""
    if not -1 <= stop <= 1:
        raise ValueError(f"stop must lie in [-1, 1], not {stop}")
    low, centre, high = accepted_temperatures(logits, y)
    return centre + stop * ((high - centre) if stop > 0 else (centre - low))


def valk_probabilities(logits, temperature: float | None = None) -> np.ndarray:
    """His float32 probabilities: of the logits, or of the logits divided by his
    temperature in float32 (numpy 1.x divided a float32 array by a float64 scalar so), each
    his whole-array softmax."""
    logits = np.asarray(logits).astype(np.float32)
    if temperature is not None:
        logits = logits / np.float32(temperature)
    return _own_max_where_lost(global_max_softmax(logits), logits)


def _own_max_where_lost(probs, scores):
    """A row whose every score lies far below the array's largest underflows to 0 / 0 in
    his softmax; it takes its own largest score instead (his rows are all finite)."""
    lost = ~np.isfinite(probs).all(axis=1)
    probs[lost] = softmax(scores[lost])
    return probs


def force_p_to_simplex(probs: np.ndarray, crop: float) -> np.ndarray:
    """His ``force_p_to_simplex`` (on a float64 copy)."""
    out = np.array(probs, dtype=np.float64)
    out[out < 0] = crop
    out[out > 1] = 1 - crop
    return out / out.sum(axis=1, keepdims=True)


def sklearn_2022_log_loss(probs, y) -> float:
    """The log-loss his cross-validations score: scikit-learn's before 1.3 (clip at 1e-15,
    rows renormalised)."""
    return log_loss(probs, y, clip=1e-15)
