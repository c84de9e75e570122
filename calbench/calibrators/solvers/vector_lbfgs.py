"""Vector scaling ``softmax(x * w + b)`` by L-BFGS beyond Newton's class limit, in
`ClassPairPreconditioner`'s coordinates, with an optional ridge: unpenalised it is vector
scaling's fit; with SMS's diagonal ridge it is the warm start of SMS's lean fit
(`calbench.calibrators.solvers.multinomial_lean`), where Newton's 2k x 2k Hessian would
be 3.2 GB at 10,000 classes."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.solvers.newton_vector import vector_label_sums, vector_log_loss
from calbench.calibrators.solvers.preconditioned import (
    MultinomialFit,
    _refreshed,
    _scipy_rounds,
)
from calbench.calibrators.solvers.preconditioners import ClassPairPreconditioner
from calbench.calibrators.solvers.threads import blas_threads


def fit_vector(
    x, y, w0, b0, *, max_iter=1000, tol=1e-6, pen_w=0.0, pen_b=0.0, center_w=1.0
) -> MultinomialFit:
    """Vector scaling ``softmax(x * w + b)`` under the log-loss (plus ``sum(pen_w (w -
    center_w)^2) + sum(pen_b b^2)``), by L-BFGS on the CPU in `ClassPairPreconditioner`'s
    coordinates, rebuilt as `fit_multinomial`'s are (rounds of `REFRESH_STEPS`, the same
    stopping rules). Its weights are the (2, k) array of rows ``w`` and ``b``."""
    label_sums = vector_label_sums(x, y)
    penalised = bool(np.any(pen_w) or np.any(pen_b))  # unpenalised: the numbers as before

    def in_weights(a, for_preconditioner=False):
        value, grad_w, grad_b, sums = vector_log_loss(
            a[0], a[1], x, y, label_sums, curvature=for_preconditioner
        )
        if penalised:
            gap = a[0] - center_w
            value += (pen_w * gap**2).sum() + (pen_b * a[1] ** 2).sum()
            grad_w, grad_b = grad_w + 2 * pen_w * gap, grad_b + 2 * pen_b * a[1]
            if sums is not None:  # the ridge's curvature in the pairs' blocks
                sums = sums.copy()
                sums[0] += 2 * pen_w
                sums[2] += 2 * pen_b
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
            lambda sums, hard, again: ClassPairPreconditioner(sums),
            max_iter=max_iter,
            tol=tol,
        )
