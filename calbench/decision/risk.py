"""Bayes decisions and the risks of Ho 2.7 / 3.2.

With predictions p_i, the Bayes rule (eq. 2.18) picks d_i = argmin_d sum_k p_ik L[k, d].
Its empirical risk uses the labels, its model risk the predictions themselves, its true
risk the true conditional probabilities where known (eq. 2.20). ``weights`` (importance
weights, e.g. for a prior shift, Ho eq. 3.37) reweight the samples of every risk.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError, check_choice


def bayes_decisions(probs: np.ndarray, loss_matrix: np.ndarray) -> np.ndarray:
    """The Bayes rule ``argmin_d sum_k p_k L[k, d]`` for each row (Ho eq. 2.18)."""
    return (probs @ loss_matrix).argmin(axis=1)


def _reduce(costs, weights, reduction, owner):
    check_choice(reduction, "reduction", owner, ("mean", "sum"))
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != costs.shape or (weights < 0).any():
            raise CalbenchError(f"{owner}: weights must be {costs.shape[0]} non-negative numbers.")
        costs = costs * weights
    return float(costs.sum() if reduction == "sum" else costs.mean())


def empirical_risk(probs, y, loss_matrix, *, reduction="mean", weights=None) -> float:
    """Cost of the Bayes decisions under the labels, summed or averaged (Ho reports sums)."""
    costs = loss_matrix[y, bayes_decisions(probs, loss_matrix)]
    return _reduce(costs, weights, reduction, "empirical_risk")


def model_risk(probs, loss_matrix, *, reduction="mean", weights=None) -> float:
    """The risk the model expects of its own decisions: ``min_d sum_k p_k L[k, d]``."""
    costs = (probs @ loss_matrix).min(axis=1)
    return _reduce(costs, weights, reduction, "model_risk")


def true_risk(probs, true_probs, loss_matrix, *, reduction="mean", weights=None) -> float:
    """Expected cost of the decisions made on ``probs`` when labels follow ``true_probs``."""
    decisions = bayes_decisions(probs, loss_matrix)
    costs = (true_probs @ loss_matrix)[np.arange(len(decisions)), decisions]
    return _reduce(costs, weights, reduction, "true_risk")
