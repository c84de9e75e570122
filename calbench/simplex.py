"""Conversions between logits and points of the probability simplex: one home for them.

Logits are the one currency between stages. Data that exist only as probabilities travel
as ``log(clip(p))``, which softmaxes back to ``p``.
"""

import numpy as np

#: Smallest positive float64; Kull et al. clip zero probabilities to it before the log.
TINY = np.finfo(np.float64).tiny


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax: the log-probabilities that methods on probabilities work on."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def probs_to_logits(probs: np.ndarray) -> np.ndarray:
    """``log(clip(p))``: the logits of data given as probabilities."""
    return np.log(np.clip(np.asarray(probs, dtype=np.float64), TINY, None))
