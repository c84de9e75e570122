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

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from calbench.calibrators.constraints import Choice
from calbench.calibrators.solvers.device_lbfgs import rounds as device_rounds
from calbench.calibrators.solvers.lbfgs import lbfgs
from calbench.calibrators.solvers.memory import features_with_ones
from calbench.calibrators.solvers.newton import row_pull_terms
from calbench.calibrators.solvers.preconditioners import (
    BlockPreconditioner,
    RowPreconditioner,
)
from calbench.calibrators.solvers.threads import blas_threads
from calbench.device import to_device
from calbench.simplex import device_softmax_log_loss, torch_softmax_log_loss

#: L-BFGS steps between rebuilds of the preconditioner (see `fit_multinomial`).
REFRESH_STEPS = 200


#: The full-matrix maps' ``preconditioner`` parameter: ``blocks`` (`BlockPreconditioner`
#: from the second round where affordable) or ``rows`` (`RowPreconditioner` throughout).
PRECONDITIONERS = Choice("blocks", "rows")

#: The full-matrix maps' ``precision`` parameter: the dtype of `fit_multinomial`'s two
#: products an evaluation, ``float64`` (the default) or ``float32``, asked for by name and
#: never chosen for the caller: the features and both products in float32, everything
#: after them in float64 (the logits, `_logit_map`; the softmax; the objective's mean; the
#: gradient's product widened before its ridge term), so that the objective L-BFGS
#: compares between trial points moves only by the products' rounding. The gradient is
#: then good to about 1e-8 (at 5,000 x 100, 1.1e-8 from float64's at the minimum), so the
#: gradient test is ``max(tol, FLOAT32_TOL)``: below it fits stalled in failing line
#: searches (tol 1e-7 at 5,000 x 100: 5.7 s against 0.27 s). On one thread at 5,000 x 100
#: an evaluation takes 8.6 ms against 11.8 ms.
PRECISIONS = Choice("float64", "float32")

#: The gradient test of a ``float32`` fit: at least this (see `fit_multinomial`).
FLOAT32_TOL = 1e-6

#: Logits from which an evaluation's softmax is written over them (5,000 x 100: 5e5).
IN_PLACE_ENTRIES = 5_000_000
#: Rows of float32 features widened at a time for a float32 fit's base logits.
REBASE_ROWS = 4096

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


def _data_tensors(x, y, offset, device, precision="float64"):
    """``[x | 1]`` (in ``precision``), the labels and the offset (float64) as torch
    tensors: sharing numpy's memory on the CPU (``device`` None), else on the device."""
    import torch

    n, k = x.shape
    if device is None:
        xt, offset = features_with_ones(x, offset, precision)
        xt_t = torch.from_numpy(xt)
        y_t = torch.from_numpy(np.asarray(y, dtype=np.int64))
        offset_t = None if offset is None else torch.from_numpy(offset)
        return xt_t, y_t, offset_t
    # the features sent once a search (`calbench.device.reuse_transfers`)
    x_t = to_device(x, device, np.float64)
    xt_t = torch.cat([x_t, x_t.new_ones((n, 1))], dim=1).to(getattr(torch, precision))
    y_t = to_device(np.asarray(y, dtype=np.int64), device)
    offset_t = None if offset is None else to_device(offset, device, np.float64)
    return xt_t, y_t, offset_t


def _preconditioning(features, curvature, blocks):
    """``(probs, hard, again) -> preconditioner`` at a round's start: `RowPreconditioner`,
    or once a round has run out of steps (``hard``) `BlockPreconditioner` where ``blocks``
    and `block_affordable` (a first round usually converges without). After a round that
    stopped before its budget with the weights' gradient above ``tol`` (``again``, not
    ``hard``) the rows' coordinates with their strict gradient test: at 100 classes SMS's
    two such rounds had built `BlockPreconditioner`s for one step each, 70% of the fit. (The
    streamlined path, SMS's, keeps its coordinates through such a round instead.)"""

    def precondition(probs, hard, again):
        if blocks and hard and block_affordable(*probs.shape):
            # its Cholesky factors in float64, from float64 features (small problems only)
            numpy = isinstance(features, np.ndarray)
            wide = features.astype(np.float64, copy=False) if numpy else features.double()
            return BlockPreconditioner(wide, probs, curvature)
        rows = RowPreconditioner(features, probs, curvature)
        return rows.strict() if again and not hard else rows

    return precondition


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
    precision="float64",
    streamlined=False,
) -> MultinomialFit:
    """Minimise ``mean -ln softmax(offset + [x | 1] A^T)[y] + sum(ridge * (A - center)^2)
    (+ the row-sum pull, `calbench.calibrators.solvers.newton.row_pull_terms`)`` over ``A`` of
    shape (k, k + 1) by L-BFGS from ``a0``, in `RowPreconditioner`'s coordinates at ``a0``,
    rebuilt every `REFRESH_STEPS` steps at the point reached (with ``blocks``, as
    `BlockPreconditioner` where `block_affordable`). ``x``: float64 features (n, k);
    ``offset``: fixed logits added (SMS's ``x``). It stops where the objective's largest
    gradient entry in the weights is at most ``tol``, or a round of steps lowers it by less
    than ``tol * 1e-6`` relative, or at ``max_iter`` steps. ``streamlined`` (SMS's): one
    round where it can be (`_scipy_rounds`' ``keep``), numpy's products (`_by_numpy`).

    ``device`` None: scipy's L-BFGS-B on the CPU, the objective in torch on all its threads,
    with BLAS held to one for scipy's own vector work (both libraries' thread pools on the
    same cores spin against each other); ``streamlined`` below 5e6 features, the two
    products in numpy's BLAS on that one thread (2026-11-29, measured on one thread only:
    2.4 to 3.1 ms a product at 5000 x 100, torch's about 3.5). A torch device: everything
    stays there, torch's L-BFGS (strong Wolfe line search, 20 corrections, the same stopping
    rules) included, so that a step moves no parameters between devices: at ImageNet shape
    scipy's own work on 1,001,000 parameters cost more than the GPU's products. Its default
    products are float64 too: on an H100 a 20,000 x 1,001 x 1,000 product took 0.96 ms in
    float64, 0.89 ms in float32, whose rounding left the ImageNet-shaped grid's fits short
    of ``tol`` (largest gradient entry 9.5e-6). ``precision``: `PRECISIONS`."""
    import torch

    n, k = x.shape
    as_numpy = device is None
    tol = max(tol, FLOAT32_TOL) if precision == "float32" else tol

    def tensor(a):
        return torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64), device=device)

    with blas_threads(1):
        xt_t, y_t, offset_t = _data_tensors(x, y, offset, device, precision)
        curvature = 2 * ridge + np.where(np.arange(k + 1) < k, 2 * float(row_pull[0]), 0.0)
        if not as_numpy:
            ridge, center, curvature = tensor(ridge), tensor(center), tensor(curvature)
        in_weights = _objective(xt_t, y_t, offset_t, ridge, center, row_pull, as_numpy, streamlined)
        keep = streamlined and precision == "float64" and as_numpy  # (float32: a base a round)
        rounds = partial(_scipy_rounds, keep=keep) if as_numpy else device_rounds
        minimise = rounds(in_weights, tol)
        features = xt_t.numpy() if as_numpy else xt_t
        precondition = _preconditioning(features, curvature, blocks)
        start = np.asarray(a0, dtype=np.float64) if as_numpy else tensor(a0)
        fit = _refreshed(in_weights, minimise, start, precondition, max_iter, tol, keep)
    return fit if as_numpy else replace(fit, weights=fit.weights.cpu().numpy())


def _objective(xt_t, y_t, offset_t, ridge, center, row_pull, as_numpy, streamlined=False):
    """``a -> (objective, its gradient in a, the probabilities or None)`` (the probabilities
    ``for_preconditioner``): the products and the softmax in torch; ``a``, the gradient and
    the probabilities numpy arrays (``as_numpy``, CPU) or tensors on the features' device."""
    import torch

    n, k = xt_t.shape[0], xt_t.shape[1] - 1
    rows = torch.arange(n, device=xt_t.device)
    row_weight = float(row_pull[0])
    numpy_path = as_numpy and streamlined
    logit_map = _logit_map(xt_t, offset_t, as_numpy, numpy_path)
    # (k + 1, n) contiguous: the gradient's product as ``[x | 1]^T R``, not ``R^T [x | 1]``
    transposed = np.ascontiguousarray(xt_t.numpy().T) if _by_numpy(xt_t, numpy_path) else None

    def in_weights(a, for_preconditioner=False):
        logits = logit_map(a, rebase=for_preconditioner)
        # On a device the objective stays a tensor: reading it would stop the host there.
        if as_numpy:  # large: the probabilities over the logits, unless float32's base
            base = getattr(logit_map, "base", {}).get("logits")
            in_place = logits.numel() >= IN_PLACE_ENTRIES and logits is not base
            value, probs = torch_softmax_log_loss(logits, y_t, in_place=in_place)
        else:
            value, probs = device_softmax_log_loss(logits, y_t)
        del logits  # n x k float64 fewer at the gradient's product (the peak's memory)
        kept, residual = None, probs.to(xt_t.dtype)
        if residual is probs:  # float64: the residual in place, the probabilities copied
            if for_preconditioner:
                kept = probs.numpy().copy() if as_numpy else probs.clone()
            probs[rows, y_t] -= 1.0
        else:  # float32: its own copy, each label's p - 1 taken in float64
            kept = (probs.numpy() if as_numpy else probs) if for_preconditioner else None
            residual[rows, y_t] = (probs[rows, y_t] - 1.0).to(residual.dtype)
        del probs  # (float32's float64 probabilities free before the product)
        gap = a - center
        if transposed is not None:
            grad = np.ascontiguousarray((transposed @ residual.numpy()).T) / n
        else:
            product = (residual.T @ xt_t).double()
            grad = (product.numpy() if as_numpy else product) / n
        grad += 2 * ridge * gap
        penalty = (ridge * gap**2).sum()
        value = value + (float(penalty) if as_numpy else penalty)
        if row_weight:
            row_value, row_grad = row_pull_terms(a, row_pull)
            value += row_value
            grad[:, :k] += row_grad[:, None]
        return value, grad, kept

    return in_weights


def _by_numpy(xt_t, numpy_path) -> bool:
    """Whether a fit's two products go through numpy's OpenBLAS: a streamlined fit (SMS's)
    in float64 on the CPU below `IN_PLACE_ENTRIES` features (one thread, 5,000 x 101 x 100:
    2.4 and 2.6 ms against torch's 3.9 and 3.9, the gradient's as ``[x | 1]^T R`` on a
    transposed copy of the features, 4 MB). Larger fits keep torch's, and their memory."""
    import torch

    return numpy_path and xt_t.dtype == torch.float64 and xt_t.numel() < IN_PLACE_ENTRIES


def _logit_map(xt_t, offset_t, as_numpy, numpy_path=False):
    """``(a, rebase) -> offset + [x | 1] A^T``, in float64. float64 features: one product.
    float32 features (`PRECISIONS`): the logits at a base point ``A0`` in float64 (the
    float32 features widened), set where ``rebase`` (each round's start), plus a float32
    product with ``A - A0``, widened. Rounding ``A`` itself to float32 moved each
    evaluation's objective by up to about 1e-9 at 100 classes, above the decrease a step
    near the minimum makes: L-BFGS's line searches failed over and over (1,000 classes:
    83 evaluations, 117 s, against float64's 8 and 16 s); the step's rounding is the
    step's size times 1e-7."""
    import torch

    def exact(features, at):
        return torch.mm(features, at) if offset_t is None else torch.addmm(offset_t, features, at)

    if _by_numpy(xt_t, numpy_path):
        features, offset = xt_t.numpy(), None if offset_t is None else offset_t.numpy()
        # SMS's offset is the features themselves (packed or copied, checked once): then
        # ``x + [x | 1] A^T = [x | 1] (A + [I | 0])^T``, one pass fewer an evaluation.
        k, view = features.shape[1] - 1, features[:, :-1]
        own = offset is not None and offset.shape == view.shape and np.array_equal(offset, view)

        def by_numpy(a, rebase=False):
            if own:
                shifted = a.copy()
                shifted[np.arange(k), np.arange(k)] += 1.0
                return torch.from_numpy(features @ shifted.T)
            logits = features @ a.T
            if offset is not None:
                logits += offset
            return torch.from_numpy(logits)

        return by_numpy
    if xt_t.dtype == torch.float64:
        return lambda a, rebase=False: exact(xt_t, (torch.from_numpy(a) if as_numpy else a).T)
    base = {}

    def widened(at):
        """The float64 logits at ``at``, the features widened `REBASE_ROWS` rows at a time
        (not a float64 copy of them all: the memory float32 saves)."""
        n = xt_t.shape[0]
        out = torch.empty((n, at.shape[1]), dtype=torch.float64, device=xt_t.device)
        for first in range(0, n, REBASE_ROWS):
            rows = slice(first, first + REBASE_ROWS)
            if offset_t is None:
                torch.mm(xt_t[rows].double(), at, out=out[rows])
            else:
                torch.addmm(offset_t[rows], xt_t[rows].double(), at, out=out[rows])
        return out

    def logits(a, rebase=False):
        a_t = torch.from_numpy(a) if as_numpy else a
        if rebase or not base:
            base.clear()  # the old base's memory free before the new one's
            base.update(logits=widened(a_t.T), weights=a_t.clone())
            return base["logits"]
        step = (a_t - base["weights"]).to(xt_t.dtype)
        return torch.add(base["logits"], torch.mm(xt_t, step.T))  # widened in the one pass

    logits.base = base
    return logits


def _scipy_rounds(in_weights, tol, keep=False):
    """One round of scipy's L-BFGS-B in ``coordinates`` from ``a`` (where the objective is
    ``value``, its gradient ``grad``), at most ``budget`` steps: ``(weights reached, steps,
    whether it stopped at the budget, (objective, gradient) there or None)``. ``keep``
    (`fit_multinomial` in float64 on the CPU): the round's first step scaled and its stop
    the weights' test too, and a round short of its budget followed in the same
    coordinates; else each as scipy's own (`fit_vector`, float32 products)."""

    def minimise(coordinates, a, value, grad, budget):
        shape = a.shape
        # scipy's first step has unit length; in theta over the gradient's norm it is the
        # step -grad that these coordinates (their Hessian near the identity) ask for, not
        # an overshoot searched back (SMS at 100 classes: one evaluation fewer a round).
        scale = (float(np.linalg.norm(coordinates.gradient(grad))) or 1.0) if keep else 1.0
        theta0 = coordinates.theta(a).ravel() / scale
        # scipy's first call is at theta0, the round's start, which the caller evaluated
        # (at ``a``, theta0 mapped back within rounding), its last at the point returned:
        # neither is evaluated twice (at 2,000 classes a one-round SMS fit: 7, not 9).
        last = {"theta": theta0, "weights": a, "value": value, "grad": grad}

        def objective(theta):
            if not np.array_equal(theta, last["theta"]):
                weights = coordinates.weights((theta * scale).reshape(shape))
                value, grad, _ = in_weights(weights)
                last.update(theta=theta.copy(), weights=weights, value=value, grad=grad)
            return last["value"], coordinates.gradient(last["grad"]).ravel() * scale

        gtol = tol * coordinates.gradient_share

        def met(intermediate_result):  # both tests at each step's point
            at_last = np.array_equal(intermediate_result.x, last["theta"])
            if at_last and abs(last["grad"]).max() <= tol:
                if abs(coordinates.gradient(last["grad"])).max() <= gtol:
                    last["met"] = True
                    raise StopIteration

        # The test in these coordinates and the weights' own, together: a round that met
        # the first alone started another, its preconditioner built again at a point
        # evaluated again and L-BFGS's pairs lost (SMS at 100 classes: 24 evaluations in
        # three rounds, 19 in one).
        tests = {"tol": 0.0, "callback": met} if keep else {"tol": gtol}
        result = lbfgs(objective, theta0, max_iter=budget, ftol=tol * 1e-6, **tests)
        steps, at_budget = int(result.nit), result.status == 1 and "met" not in last
        if np.array_equal(result.x, last["theta"]):
            return last["weights"], steps, at_budget, (last["value"], last["grad"])
        return coordinates.weights((result.x * scale).reshape(shape)), steps, at_budget, None

    return minimise


def _refreshed(in_weights, minimise, a, precondition, max_iter, tol, keep_coordinates=False):
    """Rounds of ``minimise`` from ``a``, each in the coordinates ``precondition(state,
    hard, again)`` builds at the point reached, ``state`` being what ``in_weights(a,
    for_preconditioner=True)`` returns beside the objective and its gradient (the
    probabilities for `fit_multinomial`, the class pairs' sums for `fit_vector`), ``hard``
    whether a round so far has run out of steps, ``again`` whether a round came before;
    ``keep_coordinates`` (`_scipy_rounds`' ``keep``): a round short of its budget is
    followed in the same coordinates, not rebuilt at a point evaluated again."""
    steps, hard = 0, False
    value, grad, state = in_weights(a, for_preconditioner=True)
    value = float(value)
    coordinates, state = precondition(state, hard, False), None  # (n, k) freed for the round
    while True:
        budget = min(REFRESH_STEPS, max_iter - steps)
        a, taken, at_budget, end = minimise(coordinates, a, value, grad, budget)
        steps += taken
        hard = hard or at_budget
        before = value
        # ``end``: the objective and gradient at ``a`` where the round evaluated them last.
        value, grad, state = (*end, None) if end else in_weights(a, for_preconditioner=True)
        value, largest = float(value), float(abs(grad).max())
        settled = largest <= tol or before - value <= tol * 1e-6 * abs(value)
        if steps >= max_iter or (not at_budget and settled):
            break
        # The preconditioner models the Hessian where it is built; as a weakly penalised
        # map's probabilities saturate the Hessian moves, so it is rebuilt every
        # `REFRESH_STEPS` steps and L-BFGS restarted from the point reached. It also stops
        # on the gradient in its own coordinates, which the preconditioner scales: a stop
        # whose gradient in the weights is still above ``tol`` goes on from there, as
        # long as it lowers the objective.
        if at_budget or not keep_coordinates:
            if state is None:  # what an evaluation keeps, for the coordinates (float32: a base)
                value, grad, state = in_weights(a, for_preconditioner=True)
                value = float(value)
            coordinates, state = precondition(state, hard, True), None
    return MultinomialFit(a, steps, value, largest, steps < max_iter)
