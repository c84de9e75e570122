"""Decision metrics: the average loss gap (Zhao et al.; Valk 2.6, 4.1) and empirical risk."""

from __future__ import annotations

import numpy as np

from calbench.decision import bayes_decisions
from calbench.errors import CalbenchError, check_choice, check_int
from calbench.metrics._checks import probs_and_labels, probs_pair

# Losses per chunk: keeps each (n, chunk) array near 40 MB at n = 100000.
_CHUNK = 50


def average_loss_gap(
    probs, y=None, *, true_probs=None, n_losses=500, n_decisions=2, seed=0
) -> float:
    r"""Mean over random losses of ``|predicted expected loss - true expected loss|``.

    Each loss matrix ``L`` (k x n_decisions) has i.i.d. N(0, 1) entries, drawn from
    ``numpy.random.default_rng(seed)`` so every method is scored on the same losses. With
    Bayes decisions :math:`d_i = \arg\min_d (p_i L)_d`:

    .. math::

        \mathrm{gap}(L) = \Big|\frac1n\sum_i (p_i L)_{d_i} - \frac1n\sum_i L_{y_i, d_i}\Big|

    When ``true_probs`` (the known ``E[Y | P]``) is given, the second term is the exact
    expectation :math:`\frac1n\sum_i (c_i L)_{d_i}` instead of the label average (Valk 4.1).
    """
    check_int(n_losses, "n_losses", "average_loss_gap")
    check_int(n_decisions, "n_decisions", "average_loss_gap", minimum=2)
    if true_probs is not None:
        p, target = probs_pair(probs, true_probs, "true_probs", "average_loss_gap")
    elif y is not None:
        p, labels = probs_and_labels(probs, y, "average_loss_gap")
    else:
        raise CalbenchError("average_loss_gap needs labels y or true_probs.")
    losses = np.random.default_rng(seed).standard_normal((n_losses, p.shape[1], n_decisions))
    gaps = []
    for start in range(0, n_losses, _CHUNK):
        chunk = losses[start : start + _CHUNK]
        # Decision-major layout, so the Bayes rule is a running minimum over a few
        # contiguous (n, chunk) arrays; ties keep the first decision, as argmin does.
        best_pred = best_true = None
        for d in range(n_decisions):
            costs = chunk[:, :, d].T  # (k, chunk)
            pred = p @ costs
            true = target @ costs if true_probs is not None else costs[labels]
            if best_pred is None:
                best_pred, best_true = pred, true
            else:
                better = pred < best_pred
                best_pred = np.where(better, pred, best_pred)
                best_true = np.where(better, true, best_true)
        gaps.append(np.abs(best_pred.mean(axis=0) - best_true.mean(axis=0)))
    return float(np.concatenate(gaps).mean())


def empirical_risk(probs, y, *, loss_matrix, reduction="mean") -> float:
    """Loss of the Bayes decisions under ``loss_matrix``, summed or averaged over samples."""
    check_choice(reduction, "reduction", "empirical_risk", ("mean", "sum"))
    p, y = probs_and_labels(probs, y, "empirical_risk")
    loss_matrix = np.asarray(loss_matrix, dtype=np.float64)
    if loss_matrix.ndim != 2 or loss_matrix.shape[0] != p.shape[1]:
        raise CalbenchError(
            f"empirical_risk: loss_matrix must have {p.shape[1]} rows (one per class); "
            f"got shape {loss_matrix.shape}."
        )
    costs = loss_matrix[y, bayes_decisions(p, loss_matrix)]
    return float(costs.sum() if reduction == "sum" else costs.mean())


def argmax_changed(probs, reference_probs) -> float:
    """Share of samples whose most probable class differs from the reference (uncalibrated)."""
    p, q = probs_pair(probs, reference_probs, "reference_probs", "argmax_changed")
    return float((p.argmax(axis=1) != q.argmax(axis=1)).mean())
