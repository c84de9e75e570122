"""Multinomial maps ``softmax(offset + [x | 1] A^T)`` fitted by L-BFGS in preconditioned
coordinates: the log-loss plus a diagonal ridge on ``A - center`` (and optionally a pull
on each row's sum of weights), for the full-matrix maps beyond Newton's class limit
(matrix scaling, Dirichlet calibration, structured matrix scaling).

Why: on log-probabilities (Dirichlet maps, and any map of data published as probabilities,
whose logits are ``ln p``) the features of one row move together by the row's shared offset
``-logsumexp(z)``, and at 100 classes a weak ODIR ridge leaves 10,100 weights with a Hessian
whose blocks are dominated by that one direction. Plain L-BFGS then crawls: 1,503 steps
(17 s) for ``ms_odir`` at ``reg_lambda = reg_mu = 1000`` on netcal's DenseNet-BC-100
CIFAR-100. `RowPreconditioner` takes each row's block of the Hessian at the start as
diagonal plus that rank-one direction and fits in coordinates where it is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench.calibrators.newton import row_pull_terms
from calbench.calibrators.parametric import lbfgs
from calbench.calibrators.threads import blas_threads
from calbench.simplex import torch_softmax_log_loss

#: L-BFGS steps between rebuilds of the preconditioner (see `fit_multinomial`).
REFRESH_STEPS = 200


class RowPreconditioner:
    """Coordinates ``theta`` for the weights ``A`` (one row per class) of a multinomial
    map in which its log-loss's Hessian is near the identity, for L-BFGS.

    Row c's block of the Hessian is ``(1/n) sum_i w_ic xt_i xt_i^T`` plus the ridge, with
    ``w_ic = p_ic (1 - p_ic)``. Its weighted mean ``m_c = (1/n) sum_i w_ic xt_i`` gives the
    block's dominant direction (log-probabilities of all classes rise and fall together):
    the block is modelled as ``P_c = D_c + m_c m_c^T / wbar_c``, with ``D_c`` the diagonal
    that makes ``P_c``'s diagonal exact. With ``P_c = L_c L_c^T``, ``L_c = D_c^(1/2) (I +
    gamma_c v_c v_c^T)`` (``v_c`` the unit direction of ``D_c^(-1/2) m_c``, ``(1 +
    gamma_c)^2 = 1 + beta_c``), ``theta_c = L_c^T a_c``: each map costs O(k^2), nothing
    beside an evaluation's two products. The blocks' couplings (``-p_ic p_id``) are left
    to L-BFGS.
    """

    def __init__(self, xt, probs, ridge_curvature):
        n = len(xt)
        weight = probs * (1.0 - probs)
        diagonal = (weight.T @ xt**2) / n + ridge_curvature
        mean = (weight.T @ xt) / n
        weight_mean = np.maximum(weight.mean(axis=0), np.finfo(float).tiny)[:, None]
        rank_one = mean**2 / weight_mean
        # Mathematically diagonal >= rank_one (Cauchy-Schwarz); the floor keeps rounding
        # and an unpenalised map from a singular scale.
        self.root = np.sqrt(np.maximum(diagonal - rank_one, 0.01 * diagonal))
        direction = mean / np.sqrt(weight_mean) / self.root
        beta = (direction**2).sum(axis=1, keepdims=True)
        self.unit = direction / np.sqrt(np.maximum(beta, np.finfo(float).tiny))
        self.gamma = np.sqrt(1.0 + beta) - 1.0

    def _along(self, rows):
        return self.unit * (self.unit * rows).sum(axis=1, keepdims=True)

    def theta(self, a):
        """``L^T a``."""
        scaled = a * self.root
        return scaled + self.gamma * self._along(scaled)

    def weights(self, theta):
        """``L^-T theta``, the weights at ``theta``."""
        return (theta - self.gamma / (1.0 + self.gamma) * self._along(theta)) / self.root

    def gradient(self, grad_a):
        """``L^-1 grad_a``: the gradient in ``theta`` from the gradient in the weights."""
        scaled = grad_a / self.root
        return scaled - self.gamma / (1.0 + self.gamma) * self._along(scaled)


@dataclass(frozen=True)
class MultinomialFit:
    """A fit's weights ``A = [W | b]``, its L-BFGS steps, objective, and the largest entry
    of the objective's gradient in the weights themselves (not the fitting coordinates)."""

    weights: np.ndarray
    n_iter: int
    loss: float
    gradient_max: float
    converged: bool


def fit_multinomial(
    x,
    y,
    a0,
    ridge,
    *,
    center=0.0,
    row_pull=(0.0, 0.0),
    offset=None,
    max_iter=2000,
    tol=1e-6,
) -> MultinomialFit:
    """Minimise ``mean -ln softmax(offset + [x | 1] A^T)[y] + sum(ridge * (A - center)^2)
    (+ the row-sum pull, `calbench.calibrators.newton.row_pull_terms`)`` over ``A`` of
    shape (k, k + 1) by L-BFGS from ``a0``, in `RowPreconditioner`'s coordinates at
    ``a0``, rebuilt every `REFRESH_STEPS` steps at the point reached. ``x``: float64
    features (n, k); ``offset``: fixed logits added (SMS's ``x``). It stops where the
    objective's largest gradient entry in the weights is at most ``tol``, or a round of
    steps lowers it by less than ``tol * 1e-6`` relative, or at ``max_iter`` steps.

    The objective runs in torch on all its threads, with BLAS held to one for scipy's
    own vector work: both libraries' thread pools on the same cores spin against each
    other (5000 x 100: 14 ms an evaluation with numpy's products on one thread, 11 ms
    so)."""
    import torch

    n, k = x.shape
    row_weight = float(row_pull[0])
    with blas_threads(1):
        xt = np.hstack([x, np.ones((n, 1))])
        curvature = 2 * ridge + np.where(np.arange(k + 1) < k, 2 * row_weight, 0.0)
        xt_t, y_t = torch.from_numpy(xt), torch.from_numpy(np.asarray(y, dtype=np.int64))
        offset_t = None if offset is None else torch.from_numpy(np.ascontiguousarray(offset))
        rows = torch.arange(n)

        def in_weights(a, keep_probs=False):
            at = torch.from_numpy(a).T
            logits = torch.mm(xt_t, at) if offset_t is None else torch.addmm(offset_t, xt_t, at)
            value, probs = torch_softmax_log_loss(logits, y_t)
            probs_np = probs.numpy().copy() if keep_probs else None  # for the preconditioner
            probs[rows, y_t] -= 1.0
            gap = a - center
            grad = (probs.T @ xt_t).numpy() / n + 2 * ridge * gap
            value += float((ridge * gap**2).sum())
            if row_weight:
                row_value, row_grad = row_pull_terms(a, row_pull)
                value += row_value
                grad[:, :k] += row_grad[:, None]
            return value, grad, probs_np

        a, steps = np.asarray(a0, dtype=np.float64), 0
        value, grad, probs = in_weights(a, keep_probs=True)
        while True:
            # The preconditioner models the Hessian where it is built; as a weakly
            # penalised map's probabilities saturate the Hessian moves, so it is rebuilt
            # every `REFRESH_STEPS` steps and L-BFGS restarted from the point reached. It
            # also stops on the gradient in its own coordinates, which the preconditioner
            # scales: a stop whose gradient in the weights is still above ``tol`` goes on
            # from there, as long as it lowers the objective.
            coordinates = RowPreconditioner(xt, probs, curvature)

            def objective(theta, coordinates=coordinates):
                value, grad, _ = in_weights(coordinates.weights(theta.reshape(k, k + 1)))
                return value, coordinates.gradient(grad).ravel()

            result = lbfgs(
                objective,
                coordinates.theta(a).ravel(),
                max_iter=min(REFRESH_STEPS, max_iter - steps),
                tol=tol,
                ftol=tol * 1e-6,
            )
            a, steps = coordinates.weights(result.x.reshape(k, k + 1)), steps + int(result.nit)
            before = value
            value, grad, probs = in_weights(a, keep_probs=True)
            settled = np.abs(grad).max() <= tol or before - value <= tol * 1e-6 * abs(value)
            if steps >= max_iter or (result.status != 1 and settled):
                break
    return MultinomialFit(a, steps, value, float(np.abs(grad).max()), steps < max_iter)
