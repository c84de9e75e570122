"""Matrix scaling's diagonal start: the diagonal map (a scale and an intercept per class) fitted
first where a strong pull holds the full map near its diagonal, and the test that decides."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.solvers.lbfgs import (
    lbfgs,
)
from calbench.calibrators.solvers.newton import (
    NEWTON_MAX_CLASSES,
)
from calbench.calibrators.solvers.newton_vector import newton_vector
from calbench.criteria import get_criterion
from calbench.device import to_device
from calbench.simplex import log_softmax, softmax

#: A penalty on the diagonal this many times the log-loss's mean curvature starts the fit
#: from the temperature's diagonal (`diagonal_dominates`).
DIAGONAL_START_RATIO = 10.0
#: ``reg_diagonal="auto"``: the multiples of ``k^2 / (2n)`` it chooses among, strongest
#: first (100: the diagonal held at the temperature; 0: Kull's ODIR, the diagonal free).
DIAGONAL_STRENGTHS = (100.0, 10.0, 1.0, 0.1, 0.0)
#: The share of the calibration rows ``reg_diagonal="auto"`` holds out to choose.
DIAGONAL_HOLDOUT = 0.2


def diagonal_dominates(x, logits, temperature, weights, device=None) -> bool:
    """Whether the penalty pins the off-diagonal weights: its mean weight on them against
    the log-loss's mean second derivative in one weight ``w_ij`` at the temperature, about
    ``mean over samples of p_i (1 - p_i) x_j^2`` averaged over i and j (on ``device``
    where that is a GPU: 25M exponentials at ImageNet shape)."""
    k = x.shape[1]
    off = ~np.eye(k, dtype=bool)
    penalty = weights[:, :k][off].mean() if k > 1 else 0.0
    if device is None:
        p = softmax(logits / temperature)
        curvature = np.mean((p * (1 - p)).sum(axis=1) * (x**2).sum(axis=1)) / k**2
    else:
        import torch

        p = torch.softmax(to_device(logits, device, np.float64) / temperature, dim=1)
        x_t = to_device(x, device, np.float64)
        curvature = float(((p * (1 - p)).sum(dim=1) * (x_t**2).sum(dim=1)).mean()) / k**2
    return bool(penalty >= DIAGONAL_START_RATIO * curvature)


def diagonal_minimum(x, y, temperature, terms, *, tol, max_iter, device=None):
    """``(d, b)`` minimising the log-loss of ``softmax(x * d + b)`` plus the matrix map's
    penalty on its diagonal, intercepts and row sums (``terms``:
    `MatrixScaling._penalty_terms`), from ``d = 1 / temperature``, ``b = 0``: the matrix
    map's objective with ``W = diag(d)``."""
    weights, center, (row_weight, row_center) = terms
    k = x.shape[1]
    on_diagonal, to = np.diag(weights[:, :k]), np.diag(center[:, :k])
    # Two pulls on d_i (its own and its row's sum, which is d_i here) make one.
    total = on_diagonal + row_weight
    to = np.where(
        total > 0, (on_diagonal * to + row_weight * row_center) / np.where(total > 0, total, 1), 0.0
    )
    return diagonal_fit(
        x,
        y,
        np.full(k, 1.0 / temperature),
        np.zeros(k),
        total,
        to,
        weights[:, k].copy(),
        tol=tol,
        max_iter=max_iter,
        device=device,
    )


def diagonal_fit(x, y, d, b, on_diagonal, center, on_intercept, *, tol, max_iter, device=None):
    """``(d, b)`` minimising ``log-loss(softmax(x * d + b)) + on_diagonal @ (d - center)^2
    + on_intercept @ b^2`` from the given ``(d, b)``: Newton's method up to
    `NEWTON_MAX_CLASSES` classes (log-probabilities of exact zeros stall L-BFGS), L-BFGS at
    O(n k) a step above, where Newton's 2k x 2k Hessian costs O(n k^2); its log-loss on
    ``device`` where that is a GPU (at ImageNet shape 0.3 to 0.6 s an evaluation on the
    CPU, six such fits in a default map's 37 s)."""
    k = x.shape[1]
    if k <= NEWTON_MAX_CLASSES:
        d, b, _, _ = newton_vector(
            x, y, d, b, pen_w=on_diagonal, center_w=center, pen_b=on_intercept, tol=tol * 1e-4
        )
        return d, b
    data_term = diagonal_data_term(x, y, device)

    def objective(theta):
        scale, shift = theta[:k], theta[k:]
        value, scale_grad, shift_grad = data_term(scale, shift)
        value += on_diagonal @ (scale - center) ** 2 + on_intercept @ shift**2
        scale_grad = scale_grad + 2 * on_diagonal * (scale - center)
        return value, np.concatenate([scale_grad, shift_grad + 2 * on_intercept * shift])

    result = lbfgs(objective, np.concatenate([d, b]), max_iter=max_iter, tol=tol, ftol=tol * 1e-4)
    return result.x[:k], result.x[k:]


def diagonal_data_term(x, y, device):
    """``(scale, shift) -> (log-loss of softmax(x * scale + shift), its gradients in both)``:
    numpy, or torch on ``device`` (the features sent there once)."""
    if device is None:
        nll = get_criterion("nll")

        def on_cpu(scale, shift):
            value, grad = nll(x * scale + shift, y)
            return value, (grad * x).sum(axis=0), grad.sum(axis=0)

        return on_cpu
    import torch

    features = to_device(x, device, np.float64)
    labels = to_device(np.asarray(y, dtype=np.int64), device)

    def on_device(scale, shift):
        scale_t = torch.from_numpy(scale).to(device).requires_grad_(True)
        shift_t = torch.from_numpy(shift).to(device).requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(features * scale_t + shift_t, labels)
        loss.backward()
        return float(loss.detach()), scale_t.grad.cpu().numpy(), shift_t.grad.cpu().numpy()

    return on_device


def choose_diagonal_multiple(x, y, center, row_pull_weight, *, tol, max_iter, device=None):
    """ODIR's ``reg_diagonal="auto"``: the multiple of ``k^2 / (2n)`` among
    `DIAGONAL_STRENGTHS` whose diagonal map, fitted on all but a held-out share
    (`DIAGONAL_HOLDOUT`) of the rows with the diagonal pulled to ``center``, has the least
    held-out log-loss, the strongest of ties; (that multiple, the held-out log-loss of
    each). ``row_pull_weight``: the pull on each row's sum of weights (at n rows)."""
    n, k = x.shape
    order = np.random.default_rng(0).permutation(n)
    cut = n - max(1, int(round(DIAGONAL_HOLDOUT * n)))
    fit, held = order[:cut], order[cut:]
    x_fit, y_fit, x_held, y_held = x[fit], y[fit], x[held], y[held]
    unit = k**2 / (2 * cut)  # the rule's unit, and the intercept's default, at cut rows
    # A diagonal map's row sums are its diagonal: their pull (at cut rows) adds to it.
    row_weight = row_pull_weight * n / cut
    d, b = np.full(k, center), np.zeros(k)
    scores = {}
    for multiple in DIAGONAL_STRENGTHS:
        # Strongest first, each fit starting from the last: a few steps each.
        d, b = diagonal_fit(
            x_fit,
            y_fit,
            d,
            b,
            np.full(k, multiple * unit / k + row_weight),
            center,
            np.full(k, unit / k),
            tol=tol,
            max_iter=max_iter,
            device=device,
        )
        logp = log_softmax(x_held * d + b)
        scores[multiple] = float(-logp[np.arange(len(held)), y_held].mean())
    # The strongest of the best: a weaker pull must earn its freedom.
    best = min(scores.values())
    return next(m for m in DIAGONAL_STRENGTHS if scores[m] == best), scores
