"""Vector scaling's log-loss on row chunks (`vector_log_loss`, also `fit_vector`'s) and
Newton's method on them (`newton_vector` from `LEAN_ENTRIES` entries): no (n, k) array
beside the features.

`newton_vector`'s whole-array passes keep the probabilities, the squared features, the
Hessian product's (n, 2k) float32 operand and a trial point's logits and probabilities:
five more copies of the features at once. At 25,000 x 1,000 (200 MB each) its peak was
1,250 MB above the features' (SMS's diagonal warm start), above probmetrics' whole SMS
fit. Here an evaluation is `vector_log_loss` (chunks in cache, on every core) and the
Hessian is summed chunk by chunk (`lean_vector_hessian`, a symmetric rank-update into one
2k x 2k float32 array), so the fit holds only the Hessian, its factors and chunk buffers.
The steps and stopping rules are `newton_vector`'s; the numbers agree with it to rounding
(the sums' order differs), not bit for bit, which is why small problems keep the
whole-array path.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.linalg import lu_factor, lu_solve
from scipy.linalg.blas import ssyrk

from calbench.calibrators.solvers.newton import armijo, finite_step, ran_out, stalled
from calbench.calibrators.solvers.threads import blas_threads, cores
from calbench.simplex import EXP_FLOOR

#: Entries (n k) from which `newton_vector` takes this path (25,000 x 1,000 is 2.5e7;
#: CIFAR-100's 5,000 x 100, 5e5, keeps the whole-array path and its bits).
LEAN_ENTRIES = 5_000_000
#: Float32 entries of one chunk's (rows, 2k) operand of the Hessian's rank update (8 MB).
HESSIAN_CHUNK_ENTRIES = 2**21


#: A Newton decrement (``g^T H^-1 g``, twice the objective's distance to the minimum) below
#: which the Hessian of the previous step is kept (a chord step: the iterate has moved by
#: about its square root, so the Hessian by as little) ...
REUSE_DECREMENT = 1e-6
#: ... and below which Newton's step (on a fresh Hessian) is taken without evaluating
#: where it lands: the quadratic model is then exact to rounding (after it the distance is
#: of the order of its square). A chord step's landing is evaluated.
FINAL_DECREMENT = 1e-12
#: `damped_newton`'s ``reuse_decrement`` on row chunks: there a Hessian (an O(n k^2)
#: product, 2.4 s at 25,000 x 1,000 on 2 cores) costs fifteen or more evaluations (O(n k)),
#: so chord steps on the last Hessian pay from far larger decrements than `REUSE_DECREMENT`.
LEAN_REUSE_DECREMENT = 1e-1
#: ... while each such step cuts the decrement at least this many times.
LEAN_CHORD_GAIN = 100.0


def vector_label_sums(x, y):
    """The labels' fixed part of vector scaling's gradient: per class, the sum of its rows'
    own feature and their count."""
    k = x.shape[1]
    label_x = np.bincount(y, weights=x[np.arange(len(y)), y], minlength=k)
    return label_x, np.bincount(y, minlength=k).astype(np.float64)


def _chunk_terms(features, labels, w, b, z, u, totals) -> float:
    """One chunk of `vector_log_loss`: its summed log-loss, and its sums added to
    ``totals`` (``z`` and, with the curvature, ``u`` the task's buffers for its rows)."""
    np.multiply(features, w, out=z)
    z += b
    top = z.max(axis=1, keepdims=True)
    label_logit = z[np.arange(len(z)), labels] - top[:, 0]
    z -= top
    np.maximum(z, EXP_FLOOR, out=z)
    np.exp(z, out=z)
    norm = z.sum(axis=1)
    z /= norm[:, None]
    value = float((np.log(norm) - label_logit).sum())
    totals[0] += np.einsum("ij,ij->j", z, features)
    totals[1] += z.sum(axis=0)
    if u is not None:
        np.subtract(1.0, z, out=u)
        u *= z
        totals[4] += u.sum(axis=0)
        np.multiply(u, features, out=z)
        totals[3] += z.sum(axis=0)
        totals[2] += np.einsum("ij,ij->j", z, features)
    return value


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
            u = spare[: len(z)] if curvature else None
            value += _chunk_terms(features, y[first : first + len(z)], w, b, z, u, totals)
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


def chunk_probabilities(features, w, b, out):
    """softmax(features * w + b) into ``out``, `vector_log_loss`'s chunk arithmetic (also
    `lean_vector_hessian`'s and `calbench.calibrators.scaling.temperature.scale_start`'s)."""
    np.multiply(features, w, out=out)
    out += b
    out -= out.max(axis=1, keepdims=True)
    np.maximum(out, EXP_FLOOR, out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1)[:, None]
    return out


def lean_vector_hessian(x, w, b, pen_w, pen_b):
    """Vector scaling's Hessian in ``(w, b)`` at ``(w, b)``, ridged as `newton_vector`'s:
    ``[q | p]^T [q | p]`` (``q = p x``) by float32 rank updates over row chunks (BLAS's
    ``ssyrk``, one triangle), the diagonal sums in float64."""
    n, k = x.shape
    rows = max(1, HESSIAN_CHUNK_ENTRIES // (2 * k))
    gram = np.zeros((2 * k, 2 * k), dtype=np.float32, order="F")
    sums = np.zeros((3, k))  # sum p x^2, sum p x, sum p
    probs = np.empty((min(rows, n), k))
    spare = np.empty_like(probs)
    operand = np.empty((min(rows, n), 2 * k), dtype=np.float32)
    with blas_threads(None):  # the rank updates are most of the time: every BLAS thread
        for first in range(0, n, rows):
            features = x[first : first + rows]
            m = len(features)
            p = chunk_probabilities(features, w, b, probs[:m])
            q = np.multiply(p, features, out=spare[:m])
            sums[1] += q.sum(axis=0)
            sums[2] += p.sum(axis=0)
            operand[:m, :k], operand[:m, k:] = q, p
            q *= features
            sums[0] += q.sum(axis=0)
            gram = ssyrk(1.0, operand[:m].T, beta=1.0, c=gram, trans=0, overwrite_c=1)
    upper = np.triu(gram).astype(np.float64)
    hessian = -(upper + np.triu(upper, 1).T)
    diagonal = np.concatenate([sums[0], sums[2]])
    hessian[np.diag_indices(2 * k)] += diagonal
    hessian[np.arange(k), np.arange(k, 2 * k)] += sums[1]
    hessian[np.arange(k, 2 * k), np.arange(k)] += sums[1]
    hessian /= n
    hessian[np.diag_indices(2 * k)] += 2 * np.concatenate([pen_w, pen_b])
    hessian[np.diag_indices(2 * k)] += 1e-12 * max(1.0, np.abs(np.diag(hessian)).max())
    return hessian


def _newton_step(factor, grad, x):
    """The step ``H^-1 g`` on the Hessian's LU factors (`finite_step`: finite or refused)."""
    return finite_step(lu_solve(factor, grad, check_finite=False), x)


def damped_newton(
    x, w, b, value, state, gradient, hessian, trial, max_iter, tol, on_unconverged,
    reuse_decrement=REUSE_DECREMENT, chord_gain=0.0,
):  # fmt: skip
    """Vector scaling's damped Newton iteration on ``(w, b)``, whatever computes its parts:
    ``gradient(w, b, state) -> (grad, aux)``, ``hessian(w, b, state, aux)``, and
    ``trial(w, b) -> (value, state)`` at a point of the line search. A Hessian serves again
    after a full step that did what the model promised, below ``reuse_decrement``, and
    (``chord_gain`` > 0) after a step on a reused one only where it cut the decrement by
    that factor (else the chord iteration's rate is too slow to be worth it)."""
    k = len(w)
    factor, reuse, iterations, last = None, False, 0, np.inf
    while iterations < max_iter:
        iterations += 1
        grad, aux = gradient(w, b, state)
        if np.abs(grad).max() < tol:
            if chord_gain and factor is not None:  # one more chord step (it lands where
                step = _newton_step(factor, grad, x)
                new_w, new_b = w - step[:k], b - step[k:]  # Newton's would), kept only
                new_value, _ = trial(new_w, new_b)  # where it did not go up, so that the
                if new_value <= value:  # value returned is the point's
                    w, b, value = new_w, new_b, new_value
            break
        if not reuse:
            factor = lu_factor(hessian(w, b, state, aux), check_finite=False)
        step = _newton_step(factor, grad, x)
        decrement = float(grad @ step)
        if 0.0 <= decrement < FINAL_DECREMENT * max(1.0, abs(value)):
            w, b, value = w - step[:k], b - step[k:], value - decrement / 2
            if not (reuse and chord_gain):  # Newton's own step: its model exact to rounding
                break
            # a chord step's model is not: see where it landed, and go on while it gains
            value, state = trial(w, b)
            reuse, last = decrement * chord_gain < last, decrement
            continue

        def at(scale, w=w, b=b, step=step):
            new_w, new_b = w - scale * step[:k], b - scale * step[k:]
            new_value, new_state = trial(new_w, new_b)
            return new_value, (new_w, new_b, new_state)

        accepted = armijo(at, value, decrement)
        if accepted is None and reuse:  # a kept Hessian's step may fail where a fresh one
            reuse = False  # would not: build it and try again
            continue
        if accepted is None:
            stalled(on_unconverged, grad, value)
            break
        new_value, (w, b, state), converged = accepted
        fast = not (reuse and chord_gain) or decrement * chord_gain < last  # a chord's rate
        reuse = decrement < reuse_decrement and value - new_value >= 0.25 * decrement and fast
        last = decrement
        value = new_value
        if converged:
            stalled(on_unconverged, grad, value)
            break
    else:
        ran_out(on_unconverged, max_iter, grad)
    return w, b, iterations, float(value)


def newton_vector_lean(x, y, w, b, pen_w, center_w, pen_b, max_iter, tol, on_unconverged):
    """`newton_vector`'s iteration (arguments broadcast by it) on row chunks."""
    label_sums = vector_label_sums(x, y)

    def evaluate(w, b):
        value, grad_w, grad_b, _ = vector_log_loss(w, b, x, y, label_sums)
        value += (pen_w * (w - center_w) ** 2).sum() + (pen_b * b**2).sum()
        grad = np.concatenate([grad_w + 2 * pen_w * (w - center_w), grad_b + 2 * pen_b * b])
        return value, grad

    value, grad = evaluate(w, b)
    return damped_newton(
        x, w, b, value, grad,
        gradient=lambda w, b, grad: (grad, None),
        hessian=lambda w, b, grad, aux: lean_vector_hessian(x, w, b, pen_w, pen_b),
        trial=evaluate, max_iter=max_iter, tol=tol, on_unconverged=on_unconverged,
        reuse_decrement=LEAN_REUSE_DECREMENT, chord_gain=LEAN_CHORD_GAIN,
    )  # fmt: skip
