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

from calbench.calibrators import device_lbfgs
from calbench.calibrators.constraints import Choice
from calbench.calibrators.newton import row_pull_terms, vector_label_sums, vector_log_loss
from calbench.calibrators.parametric import lbfgs
from calbench.calibrators.threads import blas_threads
from calbench.device import to_device
from calbench.simplex import device_softmax_log_loss, torch_softmax_log_loss

#: L-BFGS steps between rebuilds of the preconditioner (see `fit_multinomial`).
REFRESH_STEPS = 200


def _torch():
    import torch

    return torch


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
        weight = probs * (1.0 - probs)
        # The two products by torch, on its threads (BLAS is held to one), for numpy too.
        as_tensor = _torch().from_numpy if xp is np else (lambda a: a)
        w_t, x_t = as_tensor(weight), as_tensor(xt)
        products = [w_t.T @ x_t**2, w_t.T @ x_t]
        if xp is np:
            products = [product.numpy() for product in products]
        diagonal = products[0] / n + ridge_curvature
        mean = products[1] / n
        weight_mean = weight.mean(axis=0).clip(min=tiny)[:, None]
        rank_one = mean**2 / weight_mean
        # Mathematically diagonal >= rank_one (Cauchy-Schwarz); the floor keeps rounding
        # and an unpenalised map from a singular scale.
        self.root = xp.sqrt(xp.maximum(diagonal - rank_one, 0.01 * diagonal))
        direction = mean / xp.sqrt(weight_mean) / self.root
        beta = (direction**2).sum(axis=1, keepdims=True)
        self.unit = direction / xp.sqrt(beta.clip(min=tiny))
        self.gamma = xp.sqrt(1.0 + beta) - 1.0

    #: The share of ``tol`` a round's gradient test in these coordinates takes
    #: (`BlockPreconditioner.gradient_share`); rounds here stop at ``tol`` itself.
    gradient_share = 1.0

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


def fit_vector(x, y, w0, b0, *, max_iter=1000, tol=1e-6) -> MultinomialFit:
    """Unpenalised vector scaling ``softmax(x * w + b)`` under the log-loss, by L-BFGS on the
    CPU in `ClassPairPreconditioner`'s coordinates, rebuilt as `fit_multinomial`'s are
    (rounds of `REFRESH_STEPS`, the same stopping rules). Its weights are the (2, k) array
    of rows ``w`` and ``b``."""
    label_sums = vector_label_sums(x, y)

    def in_weights(a, for_preconditioner=False):
        value, grad_w, grad_b, sums = vector_log_loss(
            a[0], a[1], x, y, label_sums, curvature=for_preconditioner
        )
        return value, np.stack([grad_w, grad_b]), sums

    a0 = np.stack([np.asarray(w0, np.float64), np.asarray(b0, np.float64)])
    # BLAS on one thread: scipy's vector work wakes its threads, which then spin on the
    # cores the evaluation's own threads need (2,500 x 10,000: 0.11 s an evaluation, 0.07 s
    # so; `fit_multinomial` holds it for the same reason).
    with blas_threads(1):
        return _refreshed(
            in_weights,
            _scipy_rounds(in_weights, tol),
            a0,
            lambda sums, steps: ClassPairPreconditioner(sums),
            max_iter=max_iter,
            tol=tol,
        )


#: The full-matrix maps' ``preconditioner`` parameter: ``blocks`` (`BlockPreconditioner`
#: from the second round where affordable) or ``rows`` (`RowPreconditioner` throughout).
PRECONDITIONERS = Choice("blocks", "rows")

#: Classes a chunk of `BlockPreconditioner`'s products (bounding its temporary array).
BLOCK_CHUNK = 16
#: `block_affordable`'s limit on ``n k (k + 1)^2``: netcal's CIFAR-100 sets (5,000 rows,
#: 100 classes) are 5.1e9; ImageNet's shape (25,000 x 1,000) 2.5e13, where one build
#: would cost as much as a whole fit.
BLOCK_MAX_PRODUCT = 3e10


def block_affordable(n: int, k: int) -> bool:
    """Whether `BlockPreconditioner`'s blocks are worth building for n rows of k classes."""
    return n * k * (k + 1) ** 2 <= BLOCK_MAX_PRODUCT


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
    device=None,
    blocks=True,
) -> MultinomialFit:
    """Minimise ``mean -ln softmax(offset + [x | 1] A^T)[y] + sum(ridge * (A - center)^2)
    (+ the row-sum pull, `calbench.calibrators.newton.row_pull_terms`)`` over ``A`` of
    shape (k, k + 1) by L-BFGS from ``a0``, in `RowPreconditioner`'s coordinates at
    ``a0``, rebuilt every `REFRESH_STEPS` steps at the point reached (with ``blocks``, as
    `BlockPreconditioner` where `block_affordable`). ``x``: float64
    features (n, k); ``offset``: fixed logits added (SMS's ``x``). It stops where the
    objective's largest gradient entry in the weights is at most ``tol``, or a round of
    steps lowers it by less than ``tol * 1e-6`` relative, or at ``max_iter`` steps.

    ``device`` None: scipy's L-BFGS-B on the CPU, the objective in torch on all its
    threads, with BLAS held to one for scipy's own vector work (both libraries' thread
    pools on the same cores spin against each other: 5000 x 100, 14 ms an evaluation with
    numpy's products on one thread, 11 ms so). A torch device: everything stays there,
    torch's L-BFGS (strong Wolfe line search, 20 corrections, the same stopping rules)
    included, so that a step moves no parameters between devices: at ImageNet shape
    scipy's own work on 1,001,000 parameters cost more than the GPU's products. The
    products stay float64 there: on an H100 a 20,000 x 1,001 x 1,000 product took 0.96 ms
    in float64 and 0.89 ms in float32, and float32's rounding left the ImageNet-shaped
    grid's fits short of ``tol`` (largest gradient entry 9.5e-6)."""
    import torch

    n, k = x.shape
    as_numpy = device is None

    def tensor(a):
        return torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64), device=device)

    with blas_threads(1):
        if as_numpy:
            xt_t = torch.from_numpy(np.hstack([x, np.ones((n, 1))]))
            y_t = torch.from_numpy(np.asarray(y, dtype=np.int64))
            offset_t = None if offset is None else torch.from_numpy(np.ascontiguousarray(offset))
        else:  # the features sent once a search (`calbench.device.reuse_transfers`)
            x_t = to_device(x, device, np.float64)
            xt_t = torch.cat([x_t, x_t.new_ones((n, 1))], dim=1)
            y_t = to_device(np.asarray(y, dtype=np.int64), device)
            offset_t = None if offset is None else to_device(offset, device, np.float64)
        curvature = 2 * ridge + np.where(np.arange(k + 1) < k, 2 * float(row_pull[0]), 0.0)
        if not as_numpy:
            ridge, center, curvature = tensor(ridge), tensor(center), tensor(curvature)
        in_weights = _objective(xt_t, y_t, offset_t, ridge, center, row_pull, as_numpy)
        minimise = _scipy_rounds(in_weights, tol) if as_numpy else _device_rounds(in_weights, tol)
        features = xt_t.numpy() if as_numpy else xt_t

        def precondition(probs, steps):
            # A round that ran out of steps leaves a hard problem: from then on the blocks
            # are exact where that is affordable (a first round usually converges without).
            exact = blocks and steps > 0 and block_affordable(*probs.shape)
            return (BlockPreconditioner if exact else RowPreconditioner)(features, probs, curvature)

        fit = _refreshed(
            in_weights,
            minimise,
            np.asarray(a0, dtype=np.float64) if as_numpy else tensor(a0),
            precondition,
            max_iter=max_iter,
            tol=tol,
        )
    if as_numpy:
        return fit
    weights = fit.weights.cpu().numpy()
    return MultinomialFit(weights, fit.n_iter, fit.loss, fit.gradient_max, fit.converged)


def _objective(xt_t, y_t, offset_t, ridge, center, row_pull, as_numpy):
    """``a -> (objective, its gradient in a, the probabilities or None)`` (the probabilities
    ``for_preconditioner``): the products and the softmax in torch; ``a``, the gradient and
    the probabilities numpy arrays (``as_numpy``, the CPU fit) or tensors on the features'
    device."""
    import torch

    n, k = xt_t.shape[0], xt_t.shape[1] - 1
    rows = torch.arange(n, device=xt_t.device)
    row_weight = float(row_pull[0])

    def in_weights(a, for_preconditioner=False):
        at = (torch.from_numpy(a) if as_numpy else a).T
        logits = torch.mm(xt_t, at) if offset_t is None else torch.addmm(offset_t, xt_t, at)
        # On a device the objective stays a tensor: reading it would stop the host there.
        softmax_log_loss = torch_softmax_log_loss if as_numpy else device_softmax_log_loss
        value, probs = softmax_log_loss(logits, y_t)
        kept = None
        if for_preconditioner:
            kept = probs.numpy().copy() if as_numpy else probs.clone()
        probs[rows, y_t] -= 1.0
        gap = a - center
        product = probs.T @ xt_t
        grad = (product.numpy() if as_numpy else product) / n + 2 * ridge * gap
        penalty = (ridge * gap**2).sum()
        value = value + (float(penalty) if as_numpy else penalty)
        if row_weight:
            row_value, row_grad = row_pull_terms(a, row_pull)
            value += row_value
            grad[:, :k] += row_grad[:, None]
        return value, grad, kept

    return in_weights


def _scipy_rounds(in_weights, tol):
    """One round of scipy's L-BFGS-B in ``coordinates`` from ``a`` (where the objective is
    ``value``, its gradient ``grad``), at most ``budget`` steps: ``(weights reached, steps,
    whether it stopped at the budget, (objective, gradient) there or None)``."""

    def minimise(coordinates, a, value, grad, budget):
        shape = a.shape
        theta0 = coordinates.theta(a).ravel()
        # scipy's first call is at theta0, the round's start, which the caller has
        # evaluated (at ``a``, which theta0 maps back to within rounding), and its last
        # at the point it returns: neither is evaluated twice. At 2,000 classes an
        # evaluation is the fit's whole cost: a one-round SMS fit takes 7 (9 before).
        last = {"theta": theta0, "weights": a, "value": value, "grad": grad}

        def objective(theta):
            if not np.array_equal(theta, last["theta"]):
                weights = coordinates.weights(theta.reshape(shape))
                value, grad, _ = in_weights(weights)
                last.update(theta=theta.copy(), weights=weights, value=value, grad=grad)
            return last["value"], coordinates.gradient(last["grad"]).ravel()

        gtol = tol * coordinates.gradient_share
        result = lbfgs(objective, theta0, max_iter=budget, tol=gtol, ftol=tol * 1e-6)
        steps, at_budget = int(result.nit), result.status == 1
        if np.array_equal(result.x, last["theta"]):
            return last["weights"], steps, at_budget, (last["value"], last["grad"])
        return coordinates.weights(result.x.reshape(shape)), steps, at_budget, None

    return minimise


#: The device fit's gradient test within a round, as a share of ``tol``: torch's L-BFGS
#: rules stop at the first such point, where scipy's went on further; at ``tol`` itself a
#: weakly penalised 5000 x 100 fit (lambda = mu = 1) stopped 5e-6 above scipy's objective,
#: at a tenth 5e-9 above a 1e-9 reference, as scipy's own.
DEVICE_ROUND_TOL = 0.1


def _device_rounds(in_weights, tol):
    """`_scipy_rounds` with L-BFGS on the tensors' device (`device_lbfgs`, torch's rules):
    the same 20 corrections, a strong Wolfe line search as scipy's, scipy's relative
    decrease ``tol * 1e-6`` made absolute at the round's start, the gradient test
    `DEVICE_ROUND_TOL` tighter."""

    def minimise(coordinates, a, value, grad, budget):  # noqa: ARG001 (evaluates its start)
        shape = a.shape

        def evaluate(theta):
            value, grad, _ = in_weights(coordinates.weights(theta.view(shape)))
            return value, coordinates.gradient(grad).reshape(-1)

        result = device_lbfgs.minimise(
            evaluate,
            coordinates.theta(a).reshape(-1),
            max_iter=budget,
            max_eval=budget * 5 // 4 + 1,
            tolerance_grad=tol * DEVICE_ROUND_TOL * coordinates.gradient_share,
            tolerance_change=tol * 1e-6 * max(abs(value), 1.0),
        )
        weights = coordinates.weights(result.x.view(shape))
        return weights, result.n_iter, result.n_iter >= budget, None

    return minimise


def _refreshed(in_weights, minimise, a, precondition, *, max_iter, tol) -> MultinomialFit:
    """Rounds of ``minimise`` from ``a``, each in the coordinates ``precondition(state,
    steps taken)`` builds at the point reached, ``state`` being what ``in_weights(a,
    for_preconditioner=True)`` returns beside the objective and its gradient (the
    probabilities for `fit_multinomial`, the class pairs' sums for `fit_vector`)."""
    steps = 0
    value, grad, state = in_weights(a, for_preconditioner=True)
    value = float(value)
    while True:
        # The preconditioner models the Hessian where it is built; as a weakly penalised
        # map's probabilities saturate the Hessian moves, so it is rebuilt every
        # `REFRESH_STEPS` steps and L-BFGS restarted from the point reached. It also stops
        # on the gradient in its own coordinates, which the preconditioner scales: a stop
        # whose gradient in the weights is still above ``tol`` goes on from there, as
        # long as it lowers the objective.
        coordinates = precondition(state, steps)
        budget = min(REFRESH_STEPS, max_iter - steps)
        a, taken, at_budget, end = minimise(coordinates, a, value, grad, budget)
        steps += taken
        before = value
        # ``end``: the objective and gradient at ``a`` where the round evaluated them last.
        value, grad, state = (*end, None) if end else in_weights(a, for_preconditioner=True)
        value, largest = float(value), float(abs(grad).max())
        settled = largest <= tol or before - value <= tol * 1e-6 * abs(value)
        if steps >= max_iter or (not at_budget and settled):
            break
        if state is None:  # the next round's coordinates need what an evaluation keeps
            _, _, state = in_weights(a, for_preconditioner=True)
    return MultinomialFit(a, steps, value, largest, steps < max_iter)
