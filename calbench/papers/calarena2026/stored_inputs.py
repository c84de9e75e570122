"""CalArena's inputs as its HDF5 files store them: float32 probabilities, not logits.

``dataset.float32_probabilities: true`` (a data-set view, `calbench.data.views`) gives
every method those stored values: ``ln p`` of `calbench.simplex.float32_softmax`, so methods
on logits see log-probabilities and methods on probabilities see the float32 values."""

from __future__ import annotations

import dataclasses

import numpy as np

from calbench.data import Dataset
from calbench.simplex import float32_softmax, probs_to_logits


def _stored(z: np.ndarray) -> np.ndarray:
    """A binary benchmark stores class 1's probability alone, its sigmoid in float32, and
    class 0's is its complement, 0 where class 1's rounds to 1 (CalArena's cv-binary)."""
    if z.shape[1] != 2:
        return float32_softmax(z)
    gap = (z[:, 1] - z[:, 0]).astype(np.float32)
    with np.errstate(over="ignore"):
        p1 = np.float32(1) / (np.float32(1) + np.exp(-gap))
    return np.column_stack([np.float32(1) - p1, p1])


def float32_probabilities(dataset: Dataset, value=True) -> Dataset:
    """``dataset`` as CalArena's benchmark files store it."""
    return dataclasses.replace(
        dataset,
        logits_cal=probs_to_logits(_stored(dataset.logits_cal)),
        logits_test=probs_to_logits(_stored(dataset.logits_test)),
        is_logits=False,
    )
