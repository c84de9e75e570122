"""Input checks shared by the metric functions (they are public API, so they check)."""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError
from calbench.validation import check_labels, check_scores


def probs_and_labels(probs, y, owner: str) -> tuple[np.ndarray, np.ndarray]:
    p = check_scores(probs, "probs", owner)
    if (p < 0).any() or np.abs(p.sum(axis=1) - 1).max() > 1e-6:
        raise CalbenchError(f"{owner}: probs must be rows on the probability simplex.")
    return p, check_labels(y, "y", owner, len(p), p.shape[1])


def probs_pair(probs, other, other_name: str, owner: str) -> tuple[np.ndarray, np.ndarray]:
    p = check_scores(probs, "probs", owner)
    q = check_scores(other, other_name, owner)
    if q.shape != p.shape:
        raise CalbenchError(
            f"{owner}: {other_name} has shape {q.shape} but probs has shape {p.shape}."
        )
    return p, q
