"""Temperature scaling as Kull et al.'s non-neural study fits it: their TempS column
(experiments_neurips calibration.py ``'temperature_scaling': TemperatureScaling(
logit_constant=0.0)``, dirichlet_python at commit 6c750d9, ``MultinomialRegression(
method='FixDiag')`` and its ``_newton_update``).

What differs from calbench's ``ts`` (the exact optimum of the log-loss on ``ln p``):

- **The objective clips.** Their loss is the mean of ``-ln clip(q_y, eps, 1 - eps)`` with
  ``eps = 2.2e-16``: a row whose calibrated label probability lies outside that range adds
  a constant and no gradient. The classifiers with exact zeros (knn, tree) put their zero
  classes at ``ln(tiny) = -708``, so those rows stay clipped for every temperature their
  Newton steps try, and the temperature is fitted on the other rows only. calbench's ``ts``
  counts them and takes a far higher temperature, which lifts the zeros.
- **Newton's method from t = 1** (``softmax(t (z - z_k))``, the last class as reference),
  the step ``g / h`` shortened through 1, 0.9, ..., 0.1, 1e-2, ..., 1e-32 until the loss
  decreases; it stops when the gradient's absolute sum is below 1e-8, when the loss rose
  (that step discarded), or when over the last five losses none fell by more than 1e-12
  and they did not rise on balance; at most 1024 steps. Gradient and Hessian are the exact
  ones of the clipped loss (jax's in their code).
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.simplex import softmax

#: Their objective's clip (``clip_jax``: ``finfo(float64).eps``).
EPS = np.finfo(np.float64).eps
#: Their backtracking: step sizes tried in turn until the loss decreases.
STEP_SIZES = np.hstack((np.linspace(1, 0.1, 10), np.logspace(-2, -32, 31)))
#: Their ``_newton_update`` defaults.
MAX_ITER, FTOL, GTOL = 1024, 1e-12, 1e-8


def _clipped_loss_terms(t, d, y):
    """Calibrated label probabilities of ``softmax(t d)``, and which rows lie inside the
    clip (the only ones with a gradient)."""
    q = softmax(t * d)
    label = q[np.arange(len(y)), y]
    return q, label, (label > EPS) & (label < 1 - EPS)


def clipped_objective(t, d, y) -> float:
    """Their loss: the mean of ``-ln clip(q_y, eps, 1 - eps)``."""
    _, label, _ = _clipped_loss_terms(t, d, y)
    return float(np.mean(-np.log(np.clip(label, EPS, 1 - EPS))))


def clipped_derivatives(t, d, y):
    """Gradient and Hessian of `clipped_objective` in t: over the unclipped rows,
    ``E_q[d] - d_y`` and ``Var_q[d]``, averaged over all rows."""
    q, _, inside = _clipped_loss_terms(t, d, y)
    mean = np.einsum("ij,ij->i", q, d)
    second = np.einsum("ij,ij->i", q, d * d)
    grad = np.where(inside, mean - d[np.arange(len(y)), y], 0.0)
    hess = np.where(inside, second - mean**2, 0.0)
    return float(grad.mean()), float(hess.mean())


def newton_temperature(d, y) -> tuple[float, int]:
    """Their ``_newton_update`` for FixDiag from t = 1: the inverse temperature, and the
    number of Newton steps taken."""
    t = 1.0
    losses = [clipped_objective(t, d, y)]
    for i in range(MAX_ITER):
        grad, hess = clipped_derivatives(t, d, y)
        if abs(grad) < GTOL:
            return t, i
        update = grad / hess
        for step in STEP_SIZES:
            trial = t - update * step
            loss = clipped_objective(trial, d, y)
            if loss - losses[-1] < 0:
                break
        losses.append(loss)
        if np.isnan(loss):
            return t, i + 1
        if i >= 5:
            recent = np.diff(losses[-5:])
            if recent.min() > -FTOL and not recent.sum() > 0:
                return trial, i + 1
        if losses[-1] - losses[-2] > 0:
            return t, i + 1
        t = trial
    return t, MAX_ITER


class KullNewtonTemperature(Calibrator):
    """Kull et al.'s TempS of their non-neural study (module docstring): one inverse
    temperature on ``ln p`` (calbench hands probabilities over as ``ln clip(p, tiny)``, as
    their ``clip_for_log`` does), fitted by their Newton steps on their clipped loss.

    Parameters
    ----------
    None
    """

    def _fit(self, logits, y):
        d = logits - logits[:, -1:]
        self.inverse_temperature_, self.n_iter_ = newton_temperature(d, y)

    def _predict_proba(self, logits):
        return softmax(self.inverse_temperature_ * (logits - logits[:, -1:]))
