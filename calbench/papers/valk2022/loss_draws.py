"""Valk's random loss matrices, as his ``generate_normal_cost_matrices`` drew them:
``numpy.random.seed(seed)`` then ``numpy.random.normal(0, 1, n_losses * n_decisions * k)``
shaped (n_losses, n_decisions, k). ``average_loss_gap``'s ``draws: valk``
(`calbench.metrics.bayes_risk.LOSS_DRAWS`) scores on the very matrices of his tables."""

from __future__ import annotations

import numpy as np


def valk_losses(k: int, n_losses: int, n_decisions: int, seed: int) -> np.ndarray:
    """The (n_losses, k, n_decisions) matrices of his tables."""
    flat = np.random.RandomState(seed).normal(0.0, 1.0, n_losses * n_decisions * k)
    return flat.reshape(n_losses, n_decisions, k).transpose(0, 2, 1)
