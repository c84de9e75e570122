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

from calbench.errors import CalbenchError
from calbench.simplex import log_softmax

#: Classes up to which the Newton solver is used (the Hessian has (k (k+1))^2 entries).
NEWTON_MAX_CLASSES = 36
#: Classes up to which vector scaling's Newton solver is used: its 2k x 2k Hessian takes
#: 32 MB and an O(n k^2) product at 1,000 classes (ImageNet); at 5,000 it would take 800 MB
#: and 7.5e9 multiplications a step on 300 rows, where L-BFGS's steps cost O(n k).
NEWTON_VECTOR_MAX_CLASSES = 1000


def row_pull_terms(a, row_pull):
    """The row-sum pull ``weight * sum_i (sum_j W_ij - center)^2`` on ``a = [W | b]``
    (``row_pull = (weight, center)``, see `MatrixScaling`): its value, and its gradient in
    each of row i's weights (the same for all of them; none on the intercept). Numpy
    arrays or torch tensors (the value then a 0-d tensor, left on the device)."""
    weight, center = row_pull
    gap = a[:, :-1].sum(axis=1) - center
    return weight * (gap**2).sum(), 2 * weight * gap


def _objective(a, xt, y, penalty, offset=0.0, center=0.0, row_pull=(0.0, 0.0)):
    logits = xt @ a.T + offset
    logp = log_softmax(logits)
    value = -logp[np.arange(len(y)), y].mean() + (penalty * (a - center) ** 2).sum()
    if row_pull[0]:
        value += row_pull_terms(a, row_pull)[0]
    return value, np.exp(logp)


def finite_step(step: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The Newton step, or one error where it is NaN or infinite: the Hessian overflowed,
    and a line search along it would stop at the start and pass that off as the optimum."""
    if not np.isfinite(step).all():
        raise CalbenchError(
            "Newton's method failed: its step is not finite (the Hessian overflowed on "
            f"features as large as {np.abs(x).max():.3g}); nothing of the fit is used. "
            "Rescale the scores, or fit temperature scaling (ts), whose one parameter "
            "absorbs their scale."
        )
    return step


#: The most Newton steps a fit takes (a calibrator's smaller ``max_iter`` lowers it): it
#: converges in about 5 to 20 where it converges at all.
NEWTON_MAX_STEPS = 100


def newton_steps(model) -> int:
    """The steps Newton's method may take for ``model``: its ``max_iter``, at most
    `NEWTON_MAX_STEPS`."""
    return min(int(getattr(model, "max_iter", NEWTON_MAX_STEPS)), NEWTON_MAX_STEPS)


#: A line search that finds no decrease ends the fit at the optimum, where the gradient is
#: about 0; with a gradient entry above this share of the objective it ends elsewhere (the
#: objective not resolved at float64: scores of magnitude 1e30 gave 1.9e29 and ~1e30).
STALLED_GRADIENT = 1e-2


def stalled(on_unconverged, grad: np.ndarray, value: float) -> None:
    largest = float(np.abs(grad).max())
    if on_unconverged is not None and largest > STALLED_GRADIENT * max(1.0, abs(value)):
        on_unconverged(
            f"Newton's method found no decrease left at a largest gradient entry of "
            f"{largest:.1e} (objective {value:.3g}): the fit stopped short of its optimum "
            "(scores too large for float64 arithmetic?); rescale the scores."
        )


def ran_out(on_unconverged, max_iter: int, grad: np.ndarray) -> None:
    if on_unconverged is not None:
        on_unconverged(
            f"Newton's method stopped after {max_iter} steps without converging (largest "
            f"gradient entry {np.abs(grad).max():.1e}); raise max_iter or check the data."
        )


def armijo(evaluate, value, slope):
    """Backtracking (Armijo) from the full Newton step: ``evaluate(scale) -> (objective,
    state)`` at ``params - scale * step``. Returns ``(objective, state, converged)``, or
    None where no decrease is left at float64 precision (the optimum)."""
    scale = 1.0
    while True:
        new_value, state = evaluate(scale)
        if new_value <= value - 1e-4 * scale * slope or scale < 1e-10:
            break
        scale *= 0.5
    if scale < 1e-10:
        return None
    return new_value, state, value - new_value < 1e-15 * max(1.0, abs(value))


def _multinomial_hessian(xt, p, penalty, row_pull):
    """The objective's Hessian in ``[W | b]`` (row-major), a ridge of 1e-12 of its largest
    diagonal entry added: ``xt`` the features with a column of ones, ``p`` the fitted
    probabilities."""
    n, width = xt.shape
    k = p.shape[1]
    d, size = width - 1, k * width
    outer = (p[:, :, None] * xt[:, None, :]).reshape(n, size)
    hessian = -(outer.T @ outer) / n
    for c in range(k):
        block = slice(c * (d + 1), (c + 1) * (d + 1))
        hessian[block, block] += (xt * p[:, c : c + 1]).T @ xt / n
        if row_pull[0]:
            weights = slice(c * (d + 1), c * (d + 1) + d)
            hessian[weights, weights] += 2 * row_pull[0]
    hessian[np.diag_indices(size)] += 2 * penalty.ravel()
    ridge = 1e-12 * max(1.0, np.abs(np.diag(hessian)).max())
    hessian[np.diag_indices(size)] += ridge
    return hessian


def newton_multinomial(
    x,
    y,
    init,
    penalty,
    max_iter=100,
    tol=1e-10,
    free=None,
    offset=0.0,
    center=0.0,
    row_pull=(0.0, 0.0),
    on_unconverged=None,
):
    """Minimise ``mean log-loss(softmax(offset + x W^T + b)) + sum(penalty * ([W | b] -
    center)^2) + row_pull[0] * sum_i (sum_j W_ij - row_pull[1])^2``.

    Parameters
    ----------
    x : (n, d) features; y : (n,) labels in 0..k-1
    init : (k, d + 1) starting ``[W | b]``
    penalty : (k, d + 1) non-negative weights of the squared entries
    free : (k, d + 1) bool or None
        The entries that move (default: all); the others keep their ``init`` values.
    offset : (n, k) array or 0
        Fixed logits added before the softmax (``x`` itself fits ``W - I``, penalised
        towards the identity as structured matrix scaling is).
    center : (k, d + 1) array or 0
        Where the penalty pulls each entry.
    row_pull : (weight, center)
        A pull on each row's sum of weights (not the intercept), see `MatrixScaling`.
    on_unconverged : callable or None
        Told (one message) where ``max_iter`` steps end short of the convergence test
        (`calbench.calibrators.base.Calibrator.unconverged`).

    Returns ``([W | b], iterations, final objective)``.
    """
    (n, d), k = x.shape, init.shape[0]
    xt, size = np.hstack([x, np.ones((n, 1))]), k * (d + 1)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    moving = np.ones(size, bool) if free is None else np.asarray(free, bool).ravel()

    def evaluate(a):
        return _objective(a, xt, y, penalty, offset, center, row_pull)

    def gradient(a, p):
        grad = ((p - onehot).T @ xt) / n + 2 * penalty * (a - center)
        if row_pull[0]:
            grad[:, :d] += row_pull_terms(a, row_pull)[1][:, None]
        grad *= moving.reshape(k, d + 1)
        return grad

    def direction(p, grad):
        hessian = _multinomial_hessian(xt, p, penalty, row_pull)
        step = np.zeros(size)
        step[moving] = np.linalg.solve(hessian[np.ix_(moving, moving)], grad.ravel()[moving])
        return finite_step(step, x).reshape(k, d + 1)

    a = np.array(init, dtype=np.float64)
    return _damped_newton(evaluate, gradient, direction, a, max_iter, tol, on_unconverged)


def _damped_newton(evaluate, gradient, direction, a, max_iter, tol, on_unconverged):
    """Newton's iteration with an Armijo line search (`armijo`) from ``a``:
    ``evaluate(a) -> (value, probabilities)``, ``gradient(a, p)`` (zero where fixed) and
    ``direction(p, grad)``; ``([W | b], iterations, final objective)``."""
    value, p = evaluate(a)
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        grad = gradient(a, p)
        if np.abs(grad).max() < tol:
            break
        step = direction(p, grad)

        def at(scale, a=a, step=step):
            candidate = a - scale * step
            new_value, new_p = evaluate(candidate)
            return new_value, (candidate, new_p)

        accepted = armijo(at, value, float((grad * step).sum()))
        if accepted is None:
            stalled(on_unconverged, grad, value)
            break
        value, (a, p), converged = accepted
        if converged:  # no decrease left at float64: the optimum, where the gradient is ~0
            stalled(on_unconverged, grad, value)
            break
    else:
        ran_out(on_unconverged, max_iter, grad)
    return a, iterations, float(value)
