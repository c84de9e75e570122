"""Temperature scaling as Kull et al.'s non-neural study ran it: the TempS column of their
Tables 1-2 (experiments_neurips: ``calib/utils/summaries.py`` names the method
``dir_fix_diag`` "TempS"; ``'dirichlet_fix_diag': FixedDiagonalDirichletCalibrator()`` from
dirichlet_python, whose ``calib/fixeddirichlet.py`` is the same from 2019-01-18 to the commit
their repository pins, 6c750d9; the ``TemperatureScaling`` class came later, 2019-10-09).

What differs from calbench's ``ts`` (the exact optimum of the log-loss on ``ln p``):

- **No clip in the fit.** Their objective is ``-sum ln softmax(T ln p)_y`` on the raw
  probabilities. Where any calibration probability is exactly 0 (knn, tree and forest
  scores have many), ``T ln 0 = -inf`` makes autograd's gradient NaN at the first step; the
  temperature becomes NaN, no epoch's loss ever improves on the first, and the fit keeps its
  start, T = 1: the map is the identity (their Tables 1-2 rank TempS level with Uncal on
  those three classifiers).
- **Elsewhere, Adam without bias correction** (lr 1e-3, betas 0.9 and 0.999, eps 1e-8) on the
  whole calibration set, ``ceil(n / 128)`` steps an epoch (their batches all take the whole
  set); the kept T is the one after the last epoch whose summed losses beat all earlier
  epochs'; it stops when the best of the last 32 epochs improves on the best before them by
  no more than 1e-4 of it, or after 1024 epochs. Their rows are shuffled between epochs,
  which changes only the order of the sums; calbench keeps them in order.
- **Prediction** on ``ln clip(p, tiny, 1 - tiny)``: ``softmax(T ln p)`` (calbench's softmax;
  theirs skips the max shift, which moves a probability by an ulp at most).
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.simplex import TINY, softmax

#: Their Adam and stopping settings (``FixedDiagonalDirichletCalibrator.fit`` defaults).
LR, BETA_1, BETA_2, ADAM_EPS = 1e-3, 0.9, 0.999, 1e-8
BATCH_SIZE, MAX_EPOCHS, PATIENCE, FACTOR = 128, 1024, 32, 1e-4


def _loss_and_gradient(t, log_p, onehot, label_log_p):
    """Their ``_objective`` (summed, not averaged) and its derivative in T, with numpy's
    arithmetic where autograd's would be: a zero probability makes the gradient NaN.
    ``label_log_p`` is each row's ``sum_j y_j ln p_j``, the same at every step."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        powered = np.exp(t * log_p)
        q = powered / powered.sum(axis=1, keepdims=True)
        loss = -np.sum(np.log(np.sum(q * onehot, axis=1)))
        # d/dT of ln q_y = ln p_y - sum_j q_j ln p_j; autograd forms q_j * ln p_j even where
        # q_j = 0 and ln p_j = -inf, which is NaN.
        gradient = np.sum(np.sum(q * log_p, axis=1) - label_log_p)
    return loss, gradient


def fixed_diagonal_temperature(log_p, y) -> tuple[float, int]:
    """Their fit on ``ln p`` (-inf where p is 0): the kept T (an inverse temperature) and
    the epochs run."""
    onehot = np.eye(log_p.shape[1])[y]
    with np.errstate(invalid="ignore"):  # 0 * -inf: NaN, as in their gradient
        label_log_p = np.sum(onehot * log_p, axis=1)
    steps = len(np.hstack([np.arange(0, len(y), BATCH_SIZE), len(y)])) - 1
    t, kept, m, v = 1.0, 1.0, 0.0, 0.0
    losses = []
    for epoch in range(MAX_EPOCHS):
        epoch_losses = []
        for _ in range(steps):
            loss, gradient = _loss_and_gradient(t, log_p, onehot, label_log_p)
            m = BETA_1 * m + (1 - BETA_1) * gradient
            v = BETA_2 * v + (1 - BETA_2) * gradient * gradient
            t = t - LR * m / (v**0.5 + ADAM_EPS)
            epoch_losses.append(loss)
        losses.append(np.sum(epoch_losses))
        if np.isnan(t):
            # Every later loss is NaN and never beats an earlier one: T stays as kept.
            return kept, epoch + 1
        if len(losses) >= 2 and losses[-1] < np.min(losses[:-1]):
            kept = t
        if len(losses) > PATIENCE:
            before, recent = np.min(losses[:-PATIENCE]), np.min(losses[-PATIENCE:])
            if before - recent <= np.abs(before * FACTOR):
                return kept, epoch + 1
    return kept, MAX_EPOCHS


class KullFixedDiagonal(Calibrator):
    """Kull et al.'s TempS of their non-neural study (module docstring): ``softmax(T ln p)``
    with T from their Adam fit on the raw probabilities, which leaves T = 1 wherever a
    calibration probability is exactly 0. calbench hands probabilities over as
    ``ln clip(p, tiny)`` (their ``np.log`` of each nonzero p); a logit at ``ln tiny`` is
    taken as the 0 it stands for.

    Parameters
    ----------
    None
    """

    def _fit(self, logits, y):
        log_p = np.where(logits <= np.log(TINY), -np.inf, logits)
        self.inverse_temperature_, self.n_epochs_ = fixed_diagonal_temperature(log_p, y)

    def _predict_proba(self, logits):
        return softmax(self.inverse_temperature_ * logits)
