"""The preconditioners of `calbench.calibrators.solvers.preconditioned`: per row, per block of
classes, and per class pair (vector scaling), each mapping preconditioned coordinates to
the map's weights and a gradient back."""

from __future__ import annotations

import copy

import numpy as np

#: Classes a chunk of `BlockPreconditioner`'s products (bounding its temporary array).
BLOCK_CHUNK = 16


def _torch():
    import torch

    return torch


#: Probabilities (n k) from which `RowPreconditioner` on the CPU sums its blocks in float32
#: (`_narrow_sums`): 25,000 x 1,000 is 2.5e7; CIFAR-100's 5e5 keeps float64 and its bits.
NARROW_ENTRIES = 5_000_000


def _narrow_sums(xt, probs):
    """`RowPreconditioner`'s sums over n (``sum w x^2 / n``, ``sum w x / n``, ``mean w``,
    ``w = p (1 - p)``) with the weights and both products in float32: the coordinates
    are a model of the Hessian, not the objective, so their rounding (1e-7 relative)
    moves L-BFGS's path, not its minimum; the lean path's are float32 too
    (`calbench.calibrators.solvers.multinomial_lean`). It serves `fit_multinomial` from
    5e6 probabilities: the ODIR and L2 maps, and SMS where it does not take the lean
    path (``lean="never"``, float32 products). At 25,000 x 1,000 the float64 build took
    1.85 s of SMS's 16.7 on scipy's path (two 25-GFLOP products) and held a float64 copy
    of the squared features (200 MB) beside the weights (200 MB). ``xt`` and ``probs``
    are float64: their float32 copies are squared and reduced in place."""
    torch = _torch()
    n = len(xt)
    weight = torch.from_numpy(probs).float()
    weight -= weight * weight  # p (1 - p)
    narrow = torch.from_numpy(xt).float()
    mean = (weight.T @ narrow).double().numpy() / n
    narrow.mul_(narrow)
    diagonal = (weight.T @ narrow).double().numpy() / n
    weight_mean = weight.sum(dim=0, dtype=torch.float64).numpy()[:, None] / n
    return diagonal, mean, weight_mean


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
        # numpy arrays (the CPU fit) or torch tensors (`fit_multinomial` on a device).
        xp = np if isinstance(xt, np.ndarray) else _torch()
        tiny = np.finfo(float).tiny
        n = len(xt)
        # (float64 arrays only: `.float()` of a float32 array is no copy, and the sums work
        # on their copies in place; float32 features, `PRECISIONS`, get float32 products
        # below anyway)
        wide = xt.dtype == probs.dtype == np.float64
        if xp is np and wide and probs.size >= NARROW_ENTRIES:
            diagonal, mean, weight_mean = _narrow_sums(xt, probs)
            self._factor(diagonal + ridge_curvature, mean, weight_mean.clip(min=tiny), xp)
            return
        weight = 1.0 - probs  # then p (1 - p) in place: one (n, k) array, not two
        weight *= probs
        # The two products by torch, on its threads (BLAS is held to one), for numpy too.
        as_tensor = _torch().from_numpy if xp is np else (lambda a: a)
        w_t, x_t = as_tensor(weight), as_tensor(xt)
        w_t = w_t.to(x_t.dtype)  # float32 features (`PRECISIONS`): float32 products
        products = [(w_t.T @ x_t**2).double(), (w_t.T @ x_t).double()]
        if xp is np:
            products = [product.numpy() for product in products]
        diagonal = products[0] / n + ridge_curvature
        mean = products[1] / n
        self._factor(diagonal, mean, weight.mean(axis=0).clip(min=tiny)[:, None], xp)

    @classmethod
    def from_sums(cls, diagonal, mean, weight_mean):
        """The coordinates from the blocks' numpy sums over n: ``diagonal`` (ridge
        included) and ``mean`` of shape (k, k + 1), ``weight_mean`` (k, 1); for a caller
        that sums them over row chunks (`calbench.calibrators.solvers.multinomial_lean`)."""
        coordinates = cls.__new__(cls)
        coordinates._factor(diagonal, mean, weight_mean, np)
        return coordinates

    def _factor(self, diagonal, mean, weight_mean, xp):
        tiny = np.finfo(float).tiny
        rank_one = mean**2 / weight_mean
        # Mathematically diagonal >= rank_one (Cauchy-Schwarz); the floor keeps rounding
        # and an unpenalised map from a singular scale.
        self.root = xp.sqrt(xp.maximum(diagonal - rank_one, 0.01 * diagonal))
        direction = mean / xp.sqrt(weight_mean) / self.root
        beta = (direction**2).sum(axis=1, keepdims=True)
        self.unit = direction / xp.sqrt(beta.clip(min=tiny))
        self.gamma = xp.sqrt(1.0 + beta) - 1.0

    #: The share of ``tol`` a round's gradient test in these coordinates takes
    #: (`BlockPreconditioner.gradient_share`); a first round here stops at ``tol`` itself.
    gradient_share = 1.0

    def strict(self) -> RowPreconditioner:
        """These coordinates with the gradient test that bounds the weights' gradient by
        ``tol``, for a round after the first: where one stopped on ``tol`` itself with the
        weights' gradient above it, the same test at the same point would stop at once."""
        # ``grad_a = R (I + gamma u u^T) grad_theta``: each entry at most its row's sum of
        # absolute values times the largest entry of ``grad_theta``.
        spread = self.gamma * abs(self.unit) * abs(self.unit).sum(axis=1, keepdims=True)
        strict = copy.copy(self)
        strict.gradient_share = 1.0 / float((self.root * (1.0 + spread)).max())
        return strict

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


class BlockPreconditioner:
    """`RowPreconditioner`'s coordinates with each class row's Hessian block exact:
    ``B_c = (1/n) sum_i w_ic xt_i xt_i^T`` plus the ridge, ``B_c = L_c L_c^T`` (Cholesky),
    ``theta_c = L_c^T a_c``. The rank-one model leaves the rest of a row's block to L-BFGS,
    which at a weak penalty on log-probabilities (features nearly collinear) takes
    thousands of steps: netcal's LeNet-5 CIFAR-100, ms_odir at lambda = mu = 0.01, 4,998
    steps (21 s) with the rank-one model throughout, 1,156 (6.5 s) with these from the
    second round (`benchmarks/bench_odir_grid.py`). Building the blocks costs
    ``2 n k (k + 1)^2`` multiplications, about ``(k + 1) / 2`` evaluations, so it is used
    only where `block_affordable`, and from the second round on (`fit_multinomial`)."""

    def __init__(self, xt, probs, ridge_curvature):
        torch = _torch()
        self.as_numpy = isinstance(xt, np.ndarray)
        xt_t, weight = (torch.from_numpy(a) if self.as_numpy else a for a in (xt, probs))
        weight = weight * (1.0 - weight)
        n, d = xt_t.shape
        k = weight.shape[1]
        blocks = torch.empty((k, d, d), dtype=xt_t.dtype, device=xt_t.device)
        for first in range(0, k, BLOCK_CHUNK):  # (chunk, d, n) at a time, not (k, d, n)
            rows = weight[:, first : first + BLOCK_CHUNK].T[:, None, :]
            blocks[first : first + BLOCK_CHUNK] = (xt_t.T[None] * rows) @ xt_t
        blocks /= n
        curvature = torch.as_tensor(ridge_curvature, dtype=xt_t.dtype, device=xt_t.device)
        diagonal = blocks.diagonal(dim1=1, dim2=2)
        # The ridge, and a relative floor that keeps a class with no weight (p = 0 or 1 on
        # every row) and no ridge from a singular block.
        diagonal += curvature.expand(k, d) + 1e-10 * diagonal.mean(dim=1, keepdim=True)
        self.lower = torch.linalg.cholesky(blocks)
        # The weights' gradient is ``L`` times the coordinates': a round that stops at a
        # coordinate gradient of ``tol`` times this has the weights' at most ``tol``.
        self.gradient_share = 1.0 / float(self.lower.abs().sum(dim=2).max())

    def _in(self, a):
        return _torch().from_numpy(np.ascontiguousarray(a)) if self.as_numpy else a

    def _out(self, tensor):
        return tensor.numpy() if self.as_numpy else tensor

    def _solve(self, rows, upper):
        factor = self.lower.transpose(1, 2) if upper else self.lower
        torch = _torch()
        return torch.linalg.solve_triangular(factor, self._in(rows)[:, :, None], upper=upper)

    def theta(self, a):
        """``L^T a``."""
        return self._out((self.lower.transpose(1, 2) @ self._in(a)[:, :, None])[:, :, 0])

    def weights(self, theta):
        """``L^-T theta``."""
        return self._out(self._solve(theta, upper=True)[:, :, 0])

    def gradient(self, grad_a):
        """``L^-1 grad_a``."""
        return self._out(self._solve(grad_a, upper=False)[:, :, 0])


class ClassPairPreconditioner:
    """Coordinates for vector scaling's per-class pairs ``a_c = (w_c, b_c)`` (columns of a
    (2, k) array) in which each pair's block of the log-loss's Hessian is the identity:
    ``B_c = (1/n) sum_i u_ic [x_ic, 1]^T [x_ic, 1] = L_c L_c^T`` with ``u = p (1 - p)``,
    ``theta_c = L_c^T a_c``. A class's scale multiplies logits of a few units and its
    intercept ones, and its curvature is its share of the rows, so plain L-BFGS sees scales
    of very different sizes: 20,000 rows of 1,000 classes, 310 steps against 105 here. The
    couplings between classes (``-p_ic p_id``) are left to L-BFGS. ``sums``: the (3, k)
    block entries ``(1/n) sum u x^2, u x, u`` (`vector_log_loss` with ``curvature``)."""

    def __init__(self, sums):
        # A class whose probabilities are all 0 or 1 has no curvature: a floor relative to
        # the mean class's keeps its block regular.
        floor = 1e-10 * (sums[0] + sums[2]).mean() + np.finfo(float).tiny
        self.l11 = np.sqrt(sums[0] + floor)
        self.l21 = sums[1] / self.l11
        # Mathematically sums[2] >= l21^2 (Cauchy-Schwarz); as in `RowPreconditioner`,
        # rounding and a nearly constant logit must not leave a singular scale.
        schur = sums[2] + floor - self.l21**2
        self.l22 = np.sqrt(np.maximum(schur, 0.01 * (sums[2] + floor)))
        # The pairs' gradient is ``L`` times the coordinates' (`BlockPreconditioner`).
        self.gradient_share = 1.0 / float(np.maximum(self.l11, abs(self.l21) + self.l22).max())

    def theta(self, a):
        """``L^T a``."""
        return np.stack([self.l11 * a[0] + self.l21 * a[1], self.l22 * a[1]])

    def weights(self, theta):
        """``L^-T theta``."""
        b = theta[1] / self.l22
        return np.stack([(theta[0] - self.l21 * b) / self.l11, b])

    def gradient(self, grad_a):
        """``L^-1 grad_a``."""
        scaled = grad_a[0] / self.l11
        return np.stack([scaled, (grad_a[1] - self.l21 * scaled) / self.l22])
