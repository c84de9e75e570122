"""Vector scaling's Newton method on row chunks (`newton_vector` from `LEAN_ENTRIES`
entries): no (n, k) array beside the features.

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

import numpy as np
from scipy.linalg import lu_factor, lu_solve
from scipy.linalg.blas import ssyrk

from calbench.calibrators.solvers.newton import armijo, finite_step, ran_out, stalled
from calbench.calibrators.solvers.threads import blas_threads
from calbench.simplex import EXP_FLOOR

#: Entries (n k) from which `newton_vector` takes this path (25,000 x 1,000 is 2.5e7;
#: CIFAR-100's 5,000 x 100, 5e5, keeps the whole-array path and its bits).
LEAN_ENTRIES = 5_000_000
#: Float32 entries of one chunk's (rows, 2k) operand of the Hessian's rank update (8 MB).
HESSIAN_CHUNK_ENTRIES = 2**21


def _chunk_probabilities(features, w, b, out):
    """softmax(features * w + b) into ``out``, `vector_log_loss`'s chunk arithmetic."""
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
            p = _chunk_probabilities(features, w, b, probs[:m])
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


def newton_vector_lean(x, y, w, b, pen_w, center_w, pen_b, max_iter, tol, on_unconverged):
    """`newton_vector`'s iteration (arguments broadcast by it) on row chunks."""
    from calbench.calibrators.solvers.newton_vector import (
        FINAL_DECREMENT,
        REUSE_DECREMENT,
        vector_label_sums,
        vector_log_loss,
    )

    n, k = x.shape
    label_sums = vector_label_sums(x, y)

    def evaluate(w, b):
        value, grad_w, grad_b, _ = vector_log_loss(w, b, x, y, label_sums)
        value += (pen_w * (w - center_w) ** 2).sum() + (pen_b * b**2).sum()
        grad = np.concatenate([grad_w + 2 * pen_w * (w - center_w), grad_b + 2 * pen_b * b])
        return value, grad

    value, grad = evaluate(w, b)
    factor, reuse, iterations = None, False, 0
    while iterations < max_iter:
        iterations += 1
        if np.abs(grad).max() < tol:
            break
        if not reuse:
            hessian = lean_vector_hessian(x, w, b, pen_w, pen_b)
            factor = lu_factor(hessian, check_finite=False)
        step = finite_step(lu_solve(factor, grad, check_finite=False), x)
        decrement = float(grad @ step)
        if 0.0 <= decrement < FINAL_DECREMENT * max(1.0, abs(value)):
            w, b, value = w - step[:k], b - step[k:], value - decrement / 2
            break

        def at(scale, w=w, b=b, step=step):
            new_w, new_b = w - scale * step[:k], b - scale * step[k:]
            new_value, new_grad = evaluate(new_w, new_b)
            return new_value, (new_w, new_b, new_grad)

        accepted = armijo(at, value, decrement)
        if accepted is None:
            stalled(on_unconverged, grad, value)
            break
        new_value, (w, b, grad), converged = accepted
        reuse = decrement < REUSE_DECREMENT and value - new_value >= 0.25 * decrement
        value = new_value
        if converged:
            stalled(on_unconverged, grad, value)
            break
    else:
        ran_out(on_unconverged, max_iter, grad)
    return w, b, iterations, float(value)
