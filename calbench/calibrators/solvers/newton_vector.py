"""Newton's method for vector scaling (a scale and an intercept per class): its chunked
log-loss with gradient and curvature, on every core, and the damped Newton iteration."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.solvers.newton import NEWTON_MAX_CLASSES
from calbench.calibrators.solvers.newton_vector_lean import (  # noqa: F401 (re-exported)
    FINAL_DECREMENT,
    LEAN_ENTRIES,
    REUSE_DECREMENT,
    damped_newton,
    newton_vector_lean,
    vector_label_sums,
    vector_log_loss,
)
from calbench.calibrators.solvers.threads import blas_threads
from calbench.simplex import LARGE_PASS, fitting_softmax, log_softmax


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
    x, y, w, b, pen_w=0.0, center_w=1.0, pen_b=0.0, max_iter=100, tol=1e-10, on_unconverged=None,
    log_probabilities=False,
):  # fmt: skip
    """Minimise ``mean log-loss(softmax(x * w + b)) + sum(pen_w (w - center_w)^2) +
    sum(pen_b b^2)`` over the per-class scales ``w`` and intercepts ``b`` (vector scaling
    and its penalised forms) by Newton's method from ``(w, b)``.

    The Hessian is ``2k x 2k``: with ``q = p * x``, its blocks are ``diag(sum q x) - q^T q``,
    ``diag(sum q) - q^T p`` and ``diag(sum p) - p^T p`` over n, an O(n k^2) product where
    L-BFGS needs dozens of O(n k) steps (DenseNet-40 CIFAR-10: 6 steps against 45).
    ``log_probabilities``: ``x`` are log-probabilities and ``(w, b)`` the identity, so the
    whole-array path beyond `NEWTON_MAX_CLASSES` classes reads its start from ``exp(x)``
    (`log_probability_start`; at 10 classes it evaluates, bit for bit as before). Returns
    ``(w, b, iterations, final objective)``.
    """
    # One BLAS thread: OpenBLAS's spinning threads and torch's (the log-softmax) otherwise
    # contend for the same cores (5000 x 100: 9.8 ms an iteration's product and softmax
    # against 6.5 ms).
    with blas_threads(1):
        if x.size >= LEAN_ENTRIES:  # on row chunks: no (n, k) array beside the features
            k = x.shape[1]
            pen_w = np.broadcast_to(np.asarray(pen_w, dtype=np.float64), (k,))
            pen_b = np.broadcast_to(np.asarray(pen_b, dtype=np.float64), (k,))
            w, b = np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)
            args = (pen_w, center_w, pen_b, max_iter, tol, on_unconverged)
            return newton_vector_lean(x, y, w, b, *args)
        start = log_probabilities and x.shape[1] > NEWTON_MAX_CLASSES
        args = (pen_w, center_w, pen_b, max_iter, tol, on_unconverged, start)
        return _newton_vector(x, y, w, b, *args)


def log_probability_start(x, y):
    """``start`` for `newton_vector` at ``w = 1, b = 0`` where the features ``x`` are
    log-probabilities (rows of ``exp(x)`` summing to 1, SVS's and SMS's mixed ones): the
    softmax there is ``exp(x)`` and the log-loss the labels' mean ``-x``, one exponential
    pass instead of an evaluation (the same numbers to rounding). No penalty term: the
    scales' penalty is centred at 1 and the intercepts' at 0, both zero there."""
    return -float(x[np.arange(len(y)), y].mean()), np.exp(x)


def _vector_hessian(qp, p, x, x_squared, sum_q, sum_p, pen_w, pen_b):
    """Vector scaling's Hessian in ``(w, b)``, ridged; ``qp`` the (n, 2k) float32 buffer of
    its one product (see `_newton_vector`), filled here."""
    n, k = x.shape
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
    return hessian


def _newton_vector(x, y, w, b, pen_w, center_w, pen_b, max_iter, tol, on_unconverged, from_exp):
    n, k = x.shape
    label_x, label_count = vector_label_sums(x, y)
    pen_w = np.broadcast_to(np.asarray(pen_w, dtype=np.float64), (k,))
    pen_b = np.broadcast_to(np.asarray(pen_b, dtype=np.float64), (k,))
    w, b = np.array(w, dtype=np.float64), np.array(b, dtype=np.float64)
    if from_exp:
        value, p = log_probability_start(x, y)
    else:
        value, p = _vector_objective(w, b, x, y, pen_w, center_w, pen_b)
    x_squared = x * x
    # One (n, 2k)^T (n, 2k) product for the three blocks, in float32: the Hessian only
    # steers the step (the gradient and the stopping test stay float64), and the product
    # is most of an iteration's time at 100 classes. Its operand is filled in place.
    qp = np.empty((n, 2 * k), dtype=np.float32)

    def gradient(w, b, p):
        sum_q = np.einsum("ij,ij->j", p, x)
        sum_p = p.sum(axis=0)
        grad = np.concatenate(
            [
                (sum_q - label_x) / n + 2 * pen_w * (w - center_w),
                (sum_p - label_count) / n + 2 * pen_b * b,
            ]
        )
        return grad, (sum_q, sum_p)

    return damped_newton(
        x, w, b, value, p, gradient,
        hessian=lambda w, b, p, sums: _vector_hessian(qp, p, x, x_squared, *sums, pen_w, pen_b),
        trial=lambda w, b: _vector_objective(w, b, x, y, pen_w, center_w, pen_b),
        max_iter=max_iter, tol=tol, on_unconverged=on_unconverged,
    )  # fmt: skip
