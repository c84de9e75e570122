"""Newton's method for multinomial logistic regression with a diagonal quadratic penalty.

Matrix scaling and Dirichlet calibration under the log-loss are this problem (features
``x``, weights ``A = [W | b]``). On log-probabilities from classifiers that output exact
zeros (trees, forests, k-NN: ``ln 2.2e-308 = -708``) the objective is so badly conditioned
that L-BFGS runs out of iterations; Newton's method is immune to the scaling and needs a
dozen steps. Kull et al.'s own code makes the same choice (Newton below 37 classes).

The Hessian of the mean log-loss is ``(1/n) sum_i (diag(p_i) - p_i p_i^T) (x) x_i x_i^T``:
one ``(n, k d)^T (n, k d)`` product plus the block diagonal. It is singular along
``b -> b + c 1`` (softmax ignores a shared shift); a tiny ridge keeps the solve defined and,
as the gradient has no component along that direction, does not move the solution.
"""

from __future__ import annotations

import numpy as np

from calbench.simplex import log_softmax

#: Classes up to which the Newton solver is used (the Hessian has (k (k+1))^2 entries).
NEWTON_MAX_CLASSES = 36


def _objective(a, xt, y, penalty):
    logits = xt @ a.T
    logp = log_softmax(logits)
    value = -logp[np.arange(len(y)), y].mean() + (penalty * a**2).sum()
    return value, np.exp(logp)


def newton_multinomial(x, y, init, penalty, max_iter=100, tol=1e-10, free=None):
    """Minimise ``mean log-loss(softmax(x W^T + b)) + sum(penalty * [W | b]^2)``.

    Parameters
    ----------
    x : (n, d) features; y : (n,) labels in 0..k-1
    init : (k, d + 1) starting ``[W | b]``
    penalty : (k, d + 1) non-negative weights of the squared entries
    free : (k, d + 1) bool or None
        The entries that move (default: all); the others keep their ``init`` values.

    Returns ``([W | b], iterations, final objective)``.
    """
    n, d = x.shape
    xt = np.hstack([x, np.ones((n, 1))])
    k = init.shape[0]
    size = k * (d + 1)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    a = np.array(init, dtype=np.float64)
    moving = np.ones(size, bool) if free is None else np.asarray(free, bool).ravel()
    value, p = _objective(a, xt, y, penalty)
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        grad = (((p - onehot).T @ xt) / n + 2 * penalty * a) * moving.reshape(k, d + 1)
        if np.abs(grad).max() < tol:
            break
        outer = (p[:, :, None] * xt[:, None, :]).reshape(n, size)
        hessian = -(outer.T @ outer) / n
        for c in range(k):
            block = slice(c * (d + 1), (c + 1) * (d + 1))
            hessian[block, block] += (xt * p[:, c : c + 1]).T @ xt / n
        hessian[np.diag_indices(size)] += 2 * penalty.ravel()
        ridge = 1e-12 * max(1.0, np.abs(np.diag(hessian)).max())
        hessian[np.diag_indices(size)] += ridge
        step = np.zeros(size)
        step[moving] = np.linalg.solve(hessian[np.ix_(moving, moving)], grad.ravel()[moving])
        step = step.reshape(k, d + 1)
        # Backtracking (Armijo) from the full Newton step.
        slope = float((grad * step).sum())
        scale = 1.0
        while True:
            candidate = a - scale * step
            new_value, new_p = _objective(candidate, xt, y, penalty)
            if new_value <= value - 1e-4 * scale * slope or scale < 1e-10:
                break
            scale *= 0.5
        if scale < 1e-10:
            break  # no decrease left at float64 precision: at the optimum
        converged = value - new_value < 1e-15 * max(1.0, abs(value))
        a, value, p = candidate, new_value, new_p
        if converged:
            break
    return a, iterations, float(value)
