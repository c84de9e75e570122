"""SVS's log-loss beyond Newton's class limit in one (n, k) buffer kept across evaluations.

The generic chain rule (`ParametricCalibrator._data_term` with `VectorScaling`'s forward and
backward passes) holds three fresh (n, k) arrays at once beside the features: the logits,
the probabilities and their product with ``x``. At 10,000 classes on 25,000 rows each is
1.9 GB, and SVS's fit peaked at 10.3 GB with the data, above probmetrics' 9.4 GB; paging
the fresh 2 GB arrays in at every evaluation also cost more system time than the
arithmetic. Here the logits, then the probabilities over them, then the gradient's product
with ``x`` take turns in one buffer, with the generic path's operations in its order, so
the numbers are its own bit for bit (tests/calibrators/test_structured.py).
"""

from __future__ import annotations

import numpy as np

from calbench.simplex import TORCH_MIN_ENTRIES, fitting_threads, torch_softmax_log_loss


def buffered_applies(x) -> bool:
    """Whether `buffered_vector_log_loss` serves the features ``x``: C-contiguous float64,
    from `TORCH_MIN_ENTRIES` entries (where the log-loss criterion takes
    `calbench.simplex.fitting_softmax`'s torch pass, whose numbers this path repeats)."""
    return x.dtype == np.float64 and x.flags.c_contiguous and x.size >= TORCH_MIN_ENTRIES


def buffered_vector_log_loss(x, y):
    """``params -> (mean log-loss of softmax(x * coef_ + intercept_), its gradients)``,
    `ParametricCalibrator._data_term`'s numbers for `VectorScaling`'s map under the
    log-loss, in one (n, k) buffer reused by every evaluation (nothing returned points
    into it)."""
    import torch

    n = len(y)
    rows = np.arange(n)
    buffer = np.empty(x.shape)
    logits = torch.from_numpy(buffer)

    def log_loss(params):
        w, b = params["coef_"], params["intercept_"]
        grad = np.multiply(x, w, out=buffer)  # VectorScaling._forward, x * w + b
        grad += b
        with fitting_threads(x.size):  # `fitting_softmax`'s threads
            value, _ = torch_softmax_log_loss(logits, y, in_place=True)
        # over them, `nll`'s (softmax - onehot) / n
        grad[rows, y] -= 1.0
        grad /= n
        # VectorScaling._backward's sums: the intercepts' before the product overwrites
        grad_b = grad.sum(axis=0)
        grad *= x
        return value, {"coef_": grad.sum(axis=0), "intercept_": grad_b}

    return log_loss
