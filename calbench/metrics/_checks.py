"""Input checks shared by the metric functions (they are public API, so they check)."""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError
from calbench.validation import check_labels, check_scores, rows_off_one


def probs_and_labels(probs, y, owner: str) -> tuple[np.ndarray, np.ndarray]:
    p = check_scores(probs, "probs", owner)
    negative = p < 0
    if negative.any():
        row = int(np.argmax(negative.any(axis=1)))
        raise CalbenchError(
            f"{owner}: probs must be rows on the probability simplex; {int(negative.sum())} "
            f"entries are negative (row {row}: {p[row].min():.3g}). Rounding errors: "
            "np.clip(p, 0, None), then renormalise; else these are no probabilities."
        )
    off = rows_off_one(p.sum(axis=1), 1e-6)
    if off:
        count, row, total = off
        raise CalbenchError(
            f"{owner}: probs must be rows on the probability simplex; {count} rows "
            f"do not sum to 1 (row {row} sums to {total:.9g}). Rounded on export: "
            "p / p.sum(axis=1, keepdims=True)."
        )
    return p, check_labels(y, "y", owner, len(p), p.shape[1])


def probs_pair(probs, other, other_name: str, owner: str) -> tuple[np.ndarray, np.ndarray]:
    p = check_scores(probs, "probs", owner)
    q = check_scores(other, other_name, owner)
    if q.shape != p.shape:
        raise CalbenchError(
            f"{owner}: {other_name} has shape {q.shape} but probs has shape {p.shape}."
        )
    return p, q
