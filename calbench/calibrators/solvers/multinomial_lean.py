"""SMS's full map fitted lean: above 1,000 classes, from 5e6 features, and where
`fit_multinomial` would not fit in memory (10,000 classes x 25,000 rows: 56 GB by its
count, 33.5 GiB of it scipy's workspace; `calbench.calibrators.matrix.sms_memory`), in the
same coordinates (`RowPreconditioner`) to the same stopping test.

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
tolerance, not the same bits: SMS takes this path above 1,000 classes and from 5e6
features (`calbench.calibrators.matrix.sms_memory.LEAN_FROM_ENTRIES`), elsewhere only
where the other would not fit, or when asked for (`StructuredScaling(lean="always")`;
`calbench.calibrators.matrix.sms_memory.check_sms_memory`).
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
    if curvature:  # the preconditioner's products in float32 (twice as fast; a model only)
        sums = [torch.zeros((k, d), dtype=torch.float32) for _ in range(2)]
        weight_sum = torch.zeros(k, dtype=torch.float64)
        spare = torch.empty((rows, k), dtype=torch.float32)
        narrow = torch.empty((rows, d), dtype=torch.float32)
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
            weight = z - z * z  # p (1 - p)
            weight_sum += weight.sum(dim=0)
            weight = spare[:m].copy_(weight)
            features = narrow[:m].copy_(chunk)
            sums[1].addmm_(weight.T, features)
            sums[0].addmm_(weight.T, features.mul_(features))
        z[at, labels] -= 1.0
        grad_t.addmm_(z.T, chunk)
    grad /= n
    ridge.add(grad, a)
    value = value / n + ridge.value(a)
    if not curvature:
        return value, grad, None
    diagonal, mean = (sums.pop(0).double().div_(n).numpy() for _ in range(2))
    ridge.add(diagonal)
    weight_mean = (weight_sum.numpy() / n).clip(min=np.finfo(float).tiny)[:, None]
    return value, grad, (diagonal, mean, weight_mean)


def _largest(a) -> float:
    return float(max(a.max(), -a.min()))  # (no absolute-value copy)


def fit_multinomial_lean(xt, y, w, b, ridge: Ridge, *, max_iter, tol) -> MultinomialFit:
    """`fit_multinomial`'s SMS fit (offset ``x``, ridge towards 0) from the diagonal map
    ``W = I + diag(w - 1)``, intercepts ``b``, by `lean_terms` and `lean_lbfgs` in
    `RowPreconditioner`'s coordinates, rebuilt as `fit_multinomial`'s are: at the start,
    every `REFRESH_STEPS` steps, and where a round stopped short of the gradient test.
    Stops where the largest gradient entry in the weights is at most ``tol``, a round
    lowers the objective by at most ``tol * 1e-6`` relative, or at ``max_iter`` steps."""
    k = len(w)
    a = np.zeros((k, k + 1))  # (made here, so that nothing outside holds it)
    a[np.arange(k), np.arange(k)] = np.asarray(w) - 1.0
    a[:, k] = b
    steps = 0
    with blas_threads(1):  # the products are torch's, on its threads
        while True:
            value, grad, sums = lean_terms(xt, y, a, ridge, curvature=True)
            maps = _Maps(RowPreconditioner.from_sums(*sums))
            del sums
            largest, shape = _largest(grad), a.shape
            theta, grad = maps.theta(a).reshape(-1), maps.gradient(grad).reshape(-1)
            del a  # (its memory is theta's now)
            result = _round(
                xt, y, ridge, maps, shape, (theta, value, grad, largest), max_iter - steps, tol
            )
            del theta, grad
            steps += result.n_iter
            a = maps.weights(result.theta.reshape(shape))
            converged = result.gradient_max <= tol
            settled = value - result.value <= tol * 1e-6 * abs(result.value)
            if converged or settled or steps >= max_iter:
                break
            del result
    converged = converged or steps < max_iter
    return MultinomialFit(a, steps, result.value, result.gradient_max, converged)


class _Maps:
    """`RowPreconditioner`'s three maps with no parameter-sized temporary: ``theta`` and
    ``gradient`` in place of their argument, ``weights`` into one new array (its methods
    make two or three, 0.8 GB each at 10,000 classes)."""

    def __init__(self, coordinates):
        import torch

        self.unit, self.root, self.gamma = coordinates.unit, coordinates.root, coordinates.gamma
        self.unit_t = torch.from_numpy(self.unit)
        self.shrink = self.gamma / (1.0 + self.gamma)

    def _add_along(self, rows, scale) -> None:
        """``rows += scale * unit (unit . rows)``, row by row, in place."""
        import torch

        coefficient = scale * np.einsum("ij,ij->i", self.unit, rows)[:, None]
        torch.from_numpy(rows).addcmul_(self.unit_t, torch.from_numpy(coefficient))

    def theta(self, a):
        a *= self.root
        self._add_along(a, self.gamma)
        return a

    def weights(self, theta):
        out = theta.copy()
        self._add_along(out, -self.shrink)
        out /= self.root
        return out

    def gradient(self, grad):
        grad /= self.root
        self._add_along(grad, -self.shrink)
        return grad


def _round(xt, y, ridge, maps, shape, start, budget, tol):
    """One round of `lean_lbfgs` in ``maps``' coordinates from ``start``: ``(theta,
    objective, gradient there, the weights' largest gradient entry)``, at most
    `REFRESH_STEPS` steps."""

    def evaluate(theta):
        weights = maps.weights(theta.reshape(shape))
        value, grad, _ = lean_terms(xt, y, weights, ridge)
        del weights
        largest = _largest(grad)
        return value, maps.gradient(grad).reshape(-1), largest

    return lean_lbfgs.minimise(
        evaluate,
        *start,
        max_iter=min(REFRESH_STEPS, budget),
        tol=tol,
        ftol=tol * 1e-6,
    )
