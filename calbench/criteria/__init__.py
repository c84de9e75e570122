"""Criteria a parametric calibration map is fitted to minimise.

A criterion is ``f(logits, y) -> scalar tensor`` on the calibrated logits of the
calibration samples; torch autograd supplies the gradient. Registered by name once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from calbench.errors import CalbenchError


def nll(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood (log-loss) of the labels."""
    return F.cross_entropy(logits, y)


CRITERIA = {"nll": nll}


def get_criterion(name: str):
    """The criterion registered under ``name``."""
    try:
        return CRITERIA[name]
    except KeyError:
        raise CalbenchError(
            f"Unknown criterion {name!r}; known: {', '.join(sorted(CRITERIA))}."
        ) from None
