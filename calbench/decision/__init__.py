"""Loss matrices and Bayes decisions.

A loss matrix ``L`` has shape (n_classes, n_actions): ``L[y, d]`` is the cost of action d
when the label is y. Actions may differ from classes (a reject option adds a column).
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError


def bayes_decisions(probs: np.ndarray, loss_matrix: np.ndarray) -> np.ndarray:
    """The Bayes rule ``argmin_d sum_k p_k L[k, d]`` for each row (Ho eq. 2.18)."""
    return (probs @ loss_matrix).argmin(axis=1)


def zero_one(n_classes: int) -> np.ndarray:
    """0/1 loss: cost 1 for any wrong class."""
    return 1.0 - np.eye(n_classes)


def zero_one_reject(n_classes: int, reject_cost: float = 0.1) -> np.ndarray:
    """0/1 loss with a reject action (last column) of constant cost ``reject_cost``."""
    if not 0 <= reject_cost <= 1:
        raise CalbenchError(f"reject_cost must lie in [0, 1]; got {reject_cost}.")
    return np.hstack([zero_one(n_classes), np.full((n_classes, 1), float(reject_cost))])


LOSSES = {"zero_one": zero_one, "zero_one_reject": zero_one_reject}


def make_loss(name: str, n_classes: int, **options) -> np.ndarray:
    """The loss matrix registered as ``name`` for ``n_classes`` classes."""
    if name not in LOSSES:
        raise CalbenchError(f"Unknown loss {name!r}; known: {', '.join(sorted(LOSSES))}.")
    return LOSSES[name](n_classes, **options)
