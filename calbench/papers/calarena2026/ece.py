"""CalArena's ``ece-15`` as its code computes it: probmetrics' ``CalibrationError``
(torchmetrics' ``BinaryCalibrationError``, on more classes its multiclass one of the top
label) on the predictions in the dtype the method returned. The probabilities are clamped
into [1e-7, 1 - 1e-7] and renormalised; class 1's (the top label's) is binned into 15 bins
whose edges are ``torch.linspace(0, 1, 16)`` in that dtype, a value on an edge going to the
bin above it (``bucketize(right=True)``). A piecewise-constant map's outputs can sit on an
edge, where float32 and float64 edges, or the renormalisation, put them on either side: on
cv-binary's DenseNet-40 calbench's float64 classwise ECE of Hist-uniform is 0.0025002, this
0.0024431, CalArena's printed number."""

from __future__ import annotations

import numpy as np


def in_float32(probs: np.ndarray) -> bool:
    """Whether every probability is a float32 number: the method returned float32 (calbench
    stores float64; a float64 map's outputs are float32 numbers only by accident)."""
    p = np.asarray(probs, dtype=np.float64)
    return bool(np.array_equal(p.astype(np.float32).astype(np.float64), p))


def calarena_ece(probs, y, n_bins=15) -> float:
    """CalArena's ECE (module docstring) of ``probs`` against labels ``y``: class 1's on two
    classes, the top label's on more, in float32 where every probability is a float32
    number (`in_float32`), else in float64.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Equal-width bins of the confidence (CalArena: 15).

    Returns
    -------
    float
        In [0, 1]; lower is better.
    """
    import torch

    p = np.asarray(probs, dtype=np.float64)
    dtype = torch.float32 if in_float32(p) else torch.float64
    q = torch.as_tensor(p).to(dtype).clamp(1e-7, 1 - 1e-7)
    q = q / q.sum(dim=-1, keepdim=True)
    labels = torch.as_tensor(np.asarray(y))
    if q.shape[1] == 2:
        confidences, hits = q[:, 1].contiguous(), labels.to(dtype)
    else:
        confidences, predicted = q.max(dim=1)
        hits = predicted.eq(labels).to(dtype)
    edges = torch.linspace(0, 1, n_bins + 1, dtype=dtype)
    index = torch.bucketize(confidences, edges, right=True) - 1
    size = len(edges)
    counts = torch.zeros(size, dtype=dtype).scatter_add_(0, index, torch.ones_like(confidences))
    mean_p = torch.nan_to_num(
        torch.zeros(size, dtype=dtype).scatter_add_(0, index, confidences) / counts
    )
    mean_y = torch.nan_to_num(torch.zeros(size, dtype=dtype).scatter_add_(0, index, hits) / counts)
    return float(torch.sum(torch.abs(mean_y - mean_p) * (counts / counts.sum())))
