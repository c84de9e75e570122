"""SMS's full map fitted where `fit_multinomial` would not fit in memory (10,000 classes x
25,000 rows: 56 GB by its count, 33.5 GiB of it scipy's workspace), in the same
coordinates (`RowPreconditioner`) to the same stopping test.

Where the memory went, and what this path does instead:

- (n, k) arrays: `fit_multinomial` holds the logits, the probabilities (over them) and
  the preconditioner's weights whole. Here the rows go in chunks of `LEAN_CHUNK_ENTRIES`:
  a chunk's logits ``x + [x | 1] A^T``, its softmax, the residual and its products into
  the gradient (and, for the preconditioner, ``p (1 - p)`` and the squared features) are
  made and used chunk by chunk, in float64, so only the features exist whole.
- parameter-sized arrays (k (k + 1), 0.8 GB a float64 copy at 10,000 classes): scipy's
  L-BFGS-B workspace of 2 m + 5 copies is replaced by `lean_lbfgs` (5 corrections in
  float32), the ridge is applied from its three strengths (no (k, k + 1) ridge or
  curvature array), and the gradient is summed into one array in place.

The arithmetic differs from `fit_multinomial`'s in its summation order (chunks), in the
line search and in the corrections kept, so the two reach the same minimum to the
tolerance, not the same bits: this path is taken only where the other would not fit, or
when asked for (`StructuredScaling(lean="always")`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from calbench.calibrators.solvers import lean_lbfgs
from calbench.calibrators.solvers.preconditioned import REFRESH_STEPS, MultinomialFit
from calbench.calibrators.solvers.preconditioners import RowPreconditioner
from calbench.calibrators.solvers.threads import blas_threads
from calbench.simplex import EXP_FLOOR

#: Logits in a chunk of rows (16 M entries, 128 MB in float64: at 10,000 classes 1,677
#: rows, so the gradient's (k, k + 1) sum is added to 15 times an evaluation, not 60).
LEAN_CHUNK_ENTRIES = 2**24


class Ridge(NamedTuple):
    """SMS's ridge strengths on ``[W - I | b]``: off the diagonal, on it, on b."""

    off_diagonal: float
    diagonal: float
    intercept: float

    def add(self, out, a=None, scale=2.0) -> None:
        """``out += scale * ridge * a`` (``a`` None: ``scale * ridge``, its curvature), in
        place and without a ridge-shaped array."""
        import torch

        k = out.shape[0]
        diag = np.arange(k)
        off = scale * self.off_diagonal
        if a is None:
            out += off
            out[diag, diag] += scale * self.diagonal - off
            out[:, k] += scale * self.intercept - off
            return
        torch.from_numpy(out).add_(torch.from_numpy(a), alpha=off)
        out[diag, diag] += (scale * self.diagonal - off) * a[diag, diag]
        out[:, k] += (scale * self.intercept - off) * a[:, k]

    def value(self, a) -> float:
        k = a.shape[0]
        flat = a.reshape(-1)
        diag = a[np.arange(k), np.arange(k)]
        return float(
            self.off_diagonal * (flat @ flat)
            + (self.diagonal - self.off_diagonal) * (diag @ diag)
            + (self.intercept - self.off_diagonal) * (a[:, k] @ a[:, k])
        )


def lean_terms(xt, y, a, ridge: Ridge, curvature=False):
    """SMS's objective at ``a`` (k, k + 1) on ``xt = [x | 1]`` (float64, C-contiguous; x
    also the offset), its gradient in ``a``, and with ``curvature`` `RowPreconditioner`'s
    sums (else None): all by row chunks, nothing (n, k) made."""
    import torch

    n, d = xt.shape
    k = d - 1
    rows = max(1, min(n, LEAN_CHUNK_ENTRIES // d))
    xt_t, a_t = torch.from_numpy(xt), torch.from_numpy(a)
    y_t = torch.from_numpy(np.asarray(y, dtype=np.int64))
    grad = np.zeros((k, d))
    grad_t = torch.from_numpy(grad)
    buffer = torch.empty((rows, k), dtype=torch.float64)
    if curvature:
        sums = [torch.zeros((k, d), dtype=torch.float64) for _ in range(2)]
        weight_sum = torch.zeros(k, dtype=torch.float64)
        spare, squares = torch.empty_like(buffer), torch.empty((rows, d), dtype=torch.float64)
    value = 0.0
    for first in range(0, n, rows):
        chunk = xt_t[first : first + rows]
        m = len(chunk)
        labels, at = y_t[first : first + m], torch.arange(m)
        z = torch.addmm(chunk[:, :k], chunk, a_t.T, out=buffer[:m])
        z -= z.max(dim=1, keepdim=True).values
        label_logit = float(z[at, labels].sum())  # exact, before the floor
        z.clamp_(min=EXP_FLOOR).exp_()
        norm = z.sum(dim=1, keepdim=True)
        value += float(norm.log().sum()) - label_logit
        z /= norm
        if curvature:
            weight = torch.mul(z, z, out=spare[:m]).neg_().add_(z)  # p (1 - p)
            weight_sum += weight.sum(dim=0)
            sums[1].addmm_(weight.T, chunk)
            sums[0].addmm_(weight.T, torch.mul(chunk, chunk, out=squares[:m]))
        z[at, labels] -= 1.0
        grad_t.addmm_(z.T, chunk)
    grad /= n
    ridge.add(grad, a)
    value = value / n + ridge.value(a)
    if not curvature:
        return value, grad, None
    diagonal, mean = (s.numpy() / n for s in sums)
    ridge.add(diagonal)
    weight_mean = (weight_sum.numpy() / n).clip(min=np.finfo(float).tiny)[:, None]
    return value, grad, (diagonal, mean, weight_mean)


def _largest(a) -> float:
    return float(max(a.max(), -a.min()))  # (no absolute-value copy)


def fit_multinomial_lean(xt, y, a0, ridge: Ridge, *, max_iter, tol) -> MultinomialFit:
    """`fit_multinomial`'s SMS fit (offset ``x``, ridge towards 0) by `lean_terms` and
    `lean_lbfgs` in `RowPreconditioner`'s coordinates, rebuilt as `fit_multinomial`'s
    are: at the start, every `REFRESH_STEPS` steps, and where a round stopped short of the
    gradient test. Stops where the largest gradient entry in the weights is at most
    ``tol``, a round lowers the objective by at most ``tol * 1e-6`` relative, or at
    ``max_iter`` steps."""
    steps, a = 0, a0
    with blas_threads(1):  # the products are torch's, on its threads
        while True:
            value, grad, sums = lean_terms(xt, y, a, ridge, curvature=True)
            coordinates = RowPreconditioner.from_sums(*sums)
            del sums
            result = _round(xt, y, a, ridge, coordinates, value, grad, max_iter - steps, tol)
            del grad
            steps += result.n_iter
            a = coordinates.weights(result.theta.reshape(a.shape))
            converged = result.gradient_max <= tol
            settled = value - result.value <= tol * 1e-6 * abs(result.value)
            if converged or settled or steps >= max_iter:
                break
    converged = converged or steps < max_iter
    return MultinomialFit(a, steps, result.value, result.gradient_max, converged)


def _round(xt, y, a, ridge, coordinates, value, grad, budget, tol):
    """One round of `lean_lbfgs` in ``coordinates`` from ``a`` (objective ``value``,
    gradient ``grad`` in the weights), at most `REFRESH_STEPS` steps."""
    shape = a.shape

    def evaluate(theta):
        weights = coordinates.weights(theta.reshape(shape))
        value, grad, _ = lean_terms(xt, y, weights, ridge)
        del weights
        return value, coordinates.gradient(grad).reshape(-1), _largest(grad)

    largest = _largest(grad)
    theta = coordinates.theta(a).reshape(-1)
    return lean_lbfgs.minimise(
        evaluate,
        theta,
        value,
        coordinates.gradient(grad).reshape(-1),
        largest,
        max_iter=min(REFRESH_STEPS, budget),
        tol=tol,
        ftol=tol * 1e-6,
    )
