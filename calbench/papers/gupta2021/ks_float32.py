"""Gupta et al.'s KS error as their ``plot_KS_graphs`` computes it on float32 probabilities:
the baselines' outputs they scored (VecS, MS-ODIR, Dir-ODIR) came from Kull et al.'s Keras
code, whose ``predict`` returns float32 and whose fold models are averaged by ``np.mean``
of those float32 arrays (experiments_dnn, ``get_test_scores2``).

On a float32 array his code

- takes the r-th largest score (``get_top_results``: ``np.argpartition``) or the float32
  sum of the top w (``get_top_results_inclusive``: ``np.sum`` of the float32 scores);
- sorts the scores with ``scores.argsort()`` (numpy 1.x's introsort: `numpy1_order`);
- sums them with ``np.cumsum`` in float32, sequentially, and divides by N in float32;
  the cumulative outcome is float64; the KS error is the largest absolute difference.

The float32 running sum of 10000 scores near 1 rounds each step to float32's spacing near
the partial sum (about 0.001 near 10000), so the cumulative score drifts from its float64
value: on DenseNet-40 CIFAR-10 it moves Kull et al.'s Keras Dir-ODIR's top-1 KS by about
+0.001 (in %) and its within-top-2 KS by up to +0.0017, where calbench's `ks_error`
(float64) moves none. calbench stores float64 probabilities; where a method's are float32
numbers renormalised in float64 (the Keras twins), casting them back to float32 gives his
array to within one unit in the last place.
"""

from __future__ import annotations

import numpy as np

from calbench import numpy1_order
from calbench.errors import check_choice, check_int
from calbench.metrics._checks import probs_and_labels


def recalibrate_py_ks_error(probs, y, mode="top", r=1) -> float:
    """Gupta's KS error of ``probs`` in his float32 arithmetic (module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex; read as float32.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    mode : {"top", "within_top"}
        The r-th largest probability, or the float32 sum of the r largest (as
        `calbench.metrics.ks.ks_error`).
    r : int
        The rank (1-based).

    Returns
    -------
    float
        In [0, 1]; lower is better (Gupta's tables print it in %).
    """
    owner = "recalibrate_py_ks_error"
    check_choice(mode, "mode", owner, ("top", "within_top"))
    r = check_int(r, "r", owner)
    p, y = probs_and_labels(probs, y, owner)
    p = p.astype(np.float32)
    # His np.argpartition picks the same classes as a ranking wherever a row has no tied
    # scores among its top r + 1 (every row of the Keras twins on DenseNet-40 CIFAR-10).
    ranked = np.argsort(-p, axis=1, kind="stable")[:, :r]
    if mode == "top":
        scores = p[np.arange(len(y)), ranked[:, r - 1]]
        hits = ranked[:, r - 1] == y
    else:
        top = np.take_along_axis(p, ranked, axis=1)
        scores = top[:, 0]
        for j in range(1, r):  # np.sum of r float32 scores, each step rounded to float32
            scores = (scores + top[:, j]).astype(np.float32)
        hits = (ranked == y[:, None]).any(axis=1)
    order = numpy1_order.argsort(scores)
    n = len(scores)
    cum_score = np.cumsum(scores[order], dtype=np.float32) / np.float32(n)
    cum_outcome = np.cumsum(hits[order].astype(np.float64)) / n
    return float(np.amax(np.abs(cum_score.astype(np.float64) - cum_outcome)))
