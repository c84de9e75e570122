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

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.linalg import lu_factor, lu_solve

from calbench.calibrators.threads import blas_threads, cores
from calbench.errors import CalbenchError
from calbench.simplex import EXP_FLOOR, LARGE_PASS, fitting_softmax, log_softmax

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


def _finite(step: np.ndarray, x: np.ndarray) -> np.ndarray:
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


def _stalled(on_unconverged, grad: np.ndarray, value: float) -> None:
    largest = float(np.abs(grad).max())
    if on_unconverged is not None and largest > STALLED_GRADIENT * max(1.0, abs(value)):
        on_unconverged(
            f"Newton's method found no decrease left at a largest gradient entry of "
            f"{largest:.1e} (objective {value:.3g}): the fit stopped short of its optimum "
            "(scores too large for float64 arithmetic?); rescale the scores."
        )


def _ran_out(on_unconverged, max_iter: int, grad: np.ndarray) -> None:
    if on_unconverged is not None:
        on_unconverged(
            f"Newton's method stopped after {max_iter} steps without converging (largest "
            f"gradient entry {np.abs(grad).max():.1e}); raise max_iter or check the data."
        )


def _armijo(evaluate, value, slope):
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
    n, d = x.shape
    xt = np.hstack([x, np.ones((n, 1))])
    k = init.shape[0]
    size = k * (d + 1)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    a = np.array(init, dtype=np.float64)
    moving = np.ones(size, bool) if free is None else np.asarray(free, bool).ravel()
    value, p = _objective(a, xt, y, penalty, offset, center, row_pull)
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        grad = ((p - onehot).T @ xt) / n + 2 * penalty * (a - center)
        if row_pull[0]:
            grad[:, :d] += row_pull_terms(a, row_pull)[1][:, None]
        grad *= moving.reshape(k, d + 1)
        if np.abs(grad).max() < tol:
            break
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
        step = np.zeros(size)
        step[moving] = np.linalg.solve(hessian[np.ix_(moving, moving)], grad.ravel()[moving])
        step = _finite(step, x).reshape(k, d + 1)

        def at(scale, a=a, step=step):
            candidate = a - scale * step
            new_value, new_p = _objective(candidate, xt, y, penalty, offset, center, row_pull)
            return new_value, (candidate, new_p)

        accepted = _armijo(at, value, float((grad * step).sum()))
        if accepted is None:
            _stalled(on_unconverged, grad, value)
            break
        value, (a, p), converged = accepted
        if converged:  # no decrease left at float64: the optimum, where the gradient is ~0
            _stalled(on_unconverged, grad, value)
            break
    else:
        _ran_out(on_unconverged, max_iter, grad)
    return a, iterations, float(value)


def _vector_objective(w, b, x, y, pen_w, center_w, pen_b):
    if x.size >= LARGE_PASS:  # torch's threads for a long pass (BLAS's are held to one)
        import torch

        z = torch.addcmul(torch.from_numpy(b), torch.from_numpy(x), torch.from_numpy(w)).numpy()
    else:
        z = x * w
        z += b
    penalty = (pen_w * (w - center_w) ** 2).sum() + (pen_b * b**2).sum()
    fused = fitting_softmax(z, y)
    if fused is not None:
        return fused[0] + penalty, fused[1]
    logp = log_softmax(z)
    return -logp[np.arange(len(y)), y].mean() + penalty, np.exp(logp, out=logp)


def vector_label_sums(x, y):
    """The labels' fixed part of vector scaling's gradient: per class, the sum of its rows'
    own feature and their count."""
    k = x.shape[1]
    label_x = np.bincount(y, weights=x[np.arange(len(y)), y], minlength=k)
    return label_x, np.bincount(y, minlength=k).astype(np.float64)


def vector_log_loss(w, b, x, y, label_sums, curvature=False):
    """Unpenalised vector scaling's mean log-loss at ``(w, b)`` and its gradients in ``w`` and
    ``b`` (``label_sums`` from `vector_label_sums`); with ``curvature``, also the per-class
    sums of ``u x^2``, ``u x`` and ``u`` over n (``u = p (1 - p)``), the Hessian's 2 x 2
    blocks (`ClassPairPreconditioner`), else None.

    Rows go in chunks of `VECTOR_CHUNK_ENTRIES`: a chunk's logits stay in cache through the
    max, exp, normalisation and the column sums, and no (n, k) array is made (50,000 x
    2,000: 0.28 s an evaluation on 2 cores, where whole-array passes took 0.68 s). Runs of
    chunks are tasks for every core, each reusing its own buffers (a fresh 2 MB array per
    chunk is a fresh mapping from the system, paid for in page faults at every call). The
    tasks are fixed by the shape and summed in order, so the numbers do not depend on the
    number of cores. Probabilities below ``exp(EXP_FLOOR)`` of the row's largest are raised
    to it (no subnormal exponentials); the label's log-probability comes from its logit."""
    n, k = x.shape
    rows = max(1, VECTOR_CHUNK_ENTRIES // k)
    chunks = -(-n // rows)
    task_rows = rows * -(-chunks // VECTOR_TASKS)

    def task(start):
        stop = min(start + task_rows, n)
        probs = np.empty((min(rows, stop - start), k))
        spare = np.empty_like(probs) if curvature else None
        totals = np.zeros((5 if curvature else 2, k))
        value = 0.0
        for first in range(start, stop, rows):
            features = x[first : min(first + rows, stop)]
            z = probs[: len(features)]
            np.multiply(features, w, out=z)
            z += b
            top = z.max(axis=1, keepdims=True)
            label_logit = z[np.arange(len(z)), y[first : first + len(z)]] - top[:, 0]
            z -= top
            np.maximum(z, EXP_FLOOR, out=z)
            np.exp(z, out=z)
            norm = z.sum(axis=1)
            z /= norm[:, None]
            value += float((np.log(norm) - label_logit).sum())
            totals[0] += np.einsum("ij,ij->j", z, features)
            totals[1] += z.sum(axis=0)
            if curvature:
                u = spare[: len(z)]
                np.subtract(1.0, z, out=u)
                u *= z
                totals[4] += u.sum(axis=0)
                np.multiply(u, features, out=z)
                totals[3] += z.sum(axis=0)
                totals[2] += np.einsum("ij,ij->j", z, features)
        return value, totals

    starts = range(0, n, task_rows)
    workers = min(len(starts), cores())
    if workers <= 1:
        parts = [task(start) for start in starts]
    else:
        with ThreadPoolExecutor(workers) as pool:  # numpy's loops release the GIL
            parts = list(pool.map(task, starts))
    value = sum(part[0] for part in parts) / n
    sums = np.sum([part[1] for part in parts], axis=0) / n
    grad_w = sums[0] - label_sums[0] / n
    grad_b = sums[1] - label_sums[1] / n
    return value, grad_w, grad_b, sums[2:] if curvature else None


#: Entries in a chunk of `vector_log_loss`'s rows (2 MB of float64, a core's L2 cache here).
VECTOR_CHUNK_ENTRIES = 2**18
#: The tasks `vector_log_loss` splits its rows into (for the cores to share; fixed, so that
#: the sums' order is).
VECTOR_TASKS = 32


def _gram(a: np.ndarray) -> np.ndarray:
    """``a.T @ a``, on every BLAS thread where it is large: the fits hold BLAS to one
    thread (its spinning threads otherwise contend with torch's on the same cores: 5000 x
    100, 9.8 ms an iteration against 6.5 ms), but at 25,000 x 2,000 this product is most
    of a Newton step and halves on 2 cores (0.68 s against 0.40 s; torch's float32 product
    takes 0.67 s). Vector scaling at 1,000 classes: 7.9 s for six steps, 4.4 s."""
    if a.shape[0] * a.shape[1] ** 2 < LARGE_GRAM:
        return a.T @ a
    with blas_threads(None):
        return a.T @ a


#: The size (rows x columns^2) from which `_gram` uses every BLAS thread.
LARGE_GRAM = 1e9


def newton_vector(
    x, y, w, b, pen_w=0.0, center_w=1.0, pen_b=0.0, max_iter=100, tol=1e-10, on_unconverged=None
):
    """Minimise ``mean log-loss(softmax(x * w + b)) + sum(pen_w (w - center_w)^2) +
    sum(pen_b b^2)`` over the per-class scales ``w`` and intercepts ``b`` (vector scaling
    and its penalised forms) by Newton's method from ``(w, b)``.

    The Hessian is ``2k x 2k``: with ``q = p * x``, its blocks are ``diag(sum q x) - q^T q``,
    ``diag(sum q) - q^T p`` and ``diag(sum p) - p^T p`` over n, an O(n k^2) product where
    L-BFGS needs dozens of O(n k) steps (DenseNet-40 CIFAR-10: 6 steps against 45).
    Returns ``(w, b, iterations, final objective)``.
    """
    # One BLAS thread: OpenBLAS's spinning threads and torch's (the log-softmax) otherwise
    # contend for the same cores (5000 x 100: 9.8 ms an iteration's product and softmax
    # against 6.5 ms).
    with blas_threads(1):
        return _newton_vector(x, y, w, b, pen_w, center_w, pen_b, max_iter, tol, on_unconverged)


#: A Newton decrement (``g^T H^-1 g``, twice the objective's distance to the minimum) below
#: which the Hessian of the previous step is kept (a chord step: the iterate has moved by
#: about its square root, so the Hessian by as little) ...
REUSE_DECREMENT = 1e-6
#: ... and below which the step is taken without evaluating where it lands: the quadratic
#: model is then exact to rounding (after it the distance is of the order of its square).
FINAL_DECREMENT = 1e-12


def _newton_vector(x, y, w, b, pen_w, center_w, pen_b, max_iter, tol, on_unconverged):
    n, k = x.shape
    label_x, label_count = vector_label_sums(x, y)
    pen_w = np.broadcast_to(np.asarray(pen_w, dtype=np.float64), (k,))
    pen_b = np.broadcast_to(np.asarray(pen_b, dtype=np.float64), (k,))
    w, b = np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)
    value, p = _vector_objective(w, b, x, y, pen_w, center_w, pen_b)
    x_squared = x * x
    # One (n, 2k)^T (n, 2k) product for the three blocks, in float32: the Hessian only
    # steers the step (the gradient and the stopping test stay float64), and the product
    # is most of an iteration's time at 100 classes. Its operand is filled in place.
    qp = np.empty((n, 2 * k), dtype=np.float32)
    factor, reuse = None, False
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        sum_q = np.einsum("ij,ij->j", p, x)
        sum_p = p.sum(axis=0)
        grad = np.concatenate(
            [
                (sum_q - label_x) / n + 2 * pen_w * (w - center_w),
                (sum_p - label_count) / n + 2 * pen_b * b,
            ]
        )
        if np.abs(grad).max() < tol:
            break
        if not reuse:
            np.multiply(p, x, out=qp[:, :k], casting="same_kind")
            qp[:, k:] = p
            hessian = -_gram(qp).astype(np.float64)
            diagonal = np.concatenate([np.einsum("ij,ij->j", p, x_squared), sum_p])
            hessian[np.diag_indices(2 * k)] += diagonal
            hessian[np.arange(k), np.arange(k, 2 * k)] += sum_q
            hessian[np.arange(k, 2 * k), np.arange(k)] += sum_q
            hessian /= n
            hessian[np.diag_indices(2 * k)] += 2 * np.concatenate([pen_w, pen_b])
            # Singular along b -> b + c 1 (softmax ignores it; the gradient has no part there).
            hessian[np.diag_indices(2 * k)] += 1e-12 * max(1.0, np.abs(np.diag(hessian)).max())
            factor = lu_factor(hessian, check_finite=False)
        step = _finite(lu_solve(factor, grad, check_finite=False), x)
        decrement = float(grad @ step)
        if 0.0 <= decrement < FINAL_DECREMENT * max(1.0, abs(value)):
            w, b, value = w - step[:k], b - step[k:], value - decrement / 2
            break

        def at(scale, w=w, b=b, step=step):
            new_w, new_b = w - scale * step[:k], b - scale * step[k:]
            new_value, new_p = _vector_objective(new_w, new_b, x, y, pen_w, center_w, pen_b)
            return new_value, (new_w, new_b, new_p)

        accepted = _armijo(at, value, decrement)
        if accepted is None:
            _stalled(on_unconverged, grad, value)
            break
        new_value, (w, b, p), converged = accepted
        # A full step that did what the model promised: the Hessian can serve again.
        reuse = decrement < REUSE_DECREMENT and value - new_value >= 0.25 * decrement
        value = new_value
        if converged:
            _stalled(on_unconverged, grad, value)
            break
    else:
        _ran_out(on_unconverged, max_iter, grad)
    return w, b, iterations, float(value)
