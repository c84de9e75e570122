r"""Binning-free Kolmogorov-Smirnov calibration error (Gupta et al. 2021, sec. 3, App. B).

For a score :math:`z_i` with outcome :math:`o_i` (sorted by score, ascending), the
cumulative score :math:`\tilde h_i = \frac1N \sum_{j \le i} z_j` and the cumulative outcome
:math:`h_i = \frac1N \sum_{j \le i} o_j` (Gupta eqs. 9-11); the KS error is
:math:`\max_i |\tilde h_i - h_i|` (eq. 12). Scores and outcomes:

- ``mode="top", r``: the r-th largest probability; outcome ``y`` is that class (top-r,
  eq. 16; r = 1 is the top-1 / confidence case);
- ``mode="within_top", r``: the sum of the r largest probabilities; outcome ``y`` is among
  those classes (within-top-r, eq. 17);
- ``mode="class", r``: class r's probability (0-based); outcome ``y == r`` (classwise, eq. 11).

Inside a run of equal scores the curves depend on the order of the run, and so can their
largest gap: Gupta's code sorts with ``np.argsort``, in 2020 numpy 1.x's introsort, whose
order calbench follows (`calbench.numpy1_order`; numpy 2 orders equal float scores
otherwise on AVX2 machines). Only scores with ties are affected: on DenseNet-40 CIFAR-10 the
top-1 KS of Gupta's own spline code, whose float32 scores hold about 8000 ties, moves by at
most 0.02 (in %) from a stable sort's.
"""

from __future__ import annotations

import numpy as np

from calbench import numpy1_order
from calbench.errors import CalbenchError, check_choice, check_int
from calbench.metrics._checks import probs_and_labels
from calbench.packs import PackRegistry

KS_MODES = ("top", "within_top", "class")


def ks_scores(probs, y, mode="top", r=1):
    """The (score, outcome) pairs whose cumulative curves the KS error compares."""
    owner = "ks_error"
    check_choice(mode, "mode", owner, KS_MODES)
    p, y = probs_and_labels(probs, y, owner)
    rows = np.arange(len(y))
    k = p.shape[1]
    if mode == "class":
        r = check_int(r, "r", owner, minimum=0)
        if r >= k:
            raise CalbenchError(f"ks_error: mode='class' takes r in 0..{k - 1}; got r={r}.")
        return p[:, r], (y == r).astype(np.float64)
    r = check_int(r, "r", owner)
    if r > k:
        raise CalbenchError(f"ks_error: mode={mode!r} takes r in 1..{k}; got r={r}.")
    order = np.argsort(-p, axis=1, kind="stable")[:, :r]
    if mode == "top":
        cls = order[:, r - 1]
        return p[rows, cls], (cls == y).astype(np.float64)
    return np.take_along_axis(p, order, axis=1).sum(axis=1), (order == y[:, None]).any(axis=1)


def cumulative_curves(scores, outcomes):
    """(fractile, cumulative score, cumulative outcome), sorted by score (module
    docstring: equal scores in numpy 1.x's order)."""
    order = numpy1_order.argsort(scores)
    n = len(scores)
    return (
        np.arange(1, n + 1) / n,
        np.cumsum(scores[order]) / n,
        np.cumsum(np.asarray(outcomes, dtype=np.float64)[order]) / n,
    )


def ks_error(probs, y, mode="top", r=1) -> float:
    r"""Gupta et al.'s (2021) binning-free KS calibration error, :math:`\max_i |\tilde h_i -
    h_i|` over the cumulative score and outcome curves (module docstring, eq. 12).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    mode : {"top", "within_top", "class"}
        Which score: the r-th largest probability, the sum of the r largest, or class r's.
    r : int
        The rank (1-based) or, with ``mode="class"``, the class (0-based).

    Returns
    -------
    float
        In [0, 1]; lower is better (Gupta's tables print it in %).
    """
    scores, outcomes = ks_scores(probs, y, mode, r)
    _, cum_score, cum_outcome = cumulative_curves(scores, outcomes)
    return float(np.abs(cum_score - cum_outcome).max())


def kuiper_error(probs, y, mode=None, r=1, arithmetic="float64") -> float:
    r"""Kuiper's calibration error (CalArena's binary metric, probmetrics'
    ``KuiperCalibrationMetric``): on the same cumulative curves as `ks_error`, the largest
    gap of the outcome curve above the score curve plus the largest below,

    .. math::

        \max(0, \max_i (h_i - \tilde h_i)) - \min(0, \min_i (h_i - \tilde h_i)),

    so that miscalibration in both directions adds up instead of the larger one alone.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    mode : {None, "top", "within_top", "class"}
        As `ks_error`; None: class 1's probability for two classes (CalArena's), the top
        label's otherwise.
    r : int
        As `ks_error`.
    arithmetic : str
        How the curves' gap is summed: ``"float64"`` (calbench's), or one a paper pack
        brings (`KUIPER_ARITHMETIC`; ``"calarena"``: probmetrics' float32 sums, in
        ``calbench.papers.calarena2026``). Inside a run of tied scores the order of the
        outcomes moves the curves (module docstring), and binning methods' outputs tie by
        design, so a benchmark's own order can matter to its printed digits.

    Returns
    -------
    float
        In [0, 1]; lower is better.
    """
    check_choice(arithmetic, "arithmetic", "kuiper_error", tuple(KUIPER_ARITHMETIC))
    if mode is None:
        mode = "class" if np.shape(probs)[1:] == (2,) else "top"
    scores, outcomes = ks_scores(probs, y, mode, r)
    gap = KUIPER_ARITHMETIC[arithmetic](scores, outcomes)
    return float(max(gap.max(), 0.0) - min(gap.min(), 0.0))


def _float64_gap(scores, outcomes) -> np.ndarray:
    """The cumulative outcomes minus the cumulative scores, in float64, scores sorted."""
    _, cum_score, cum_outcome = cumulative_curves(scores, outcomes)
    return cum_outcome - cum_score


#: How `kuiper_error` sums its curves: ``(scores, outcomes) -> the gap at each point``; a
#: paper pack brings its benchmark's own (its ``KUIPER_ARITHMETIC``).
KUIPER_ARITHMETIC = PackRegistry("KUIPER_ARITHMETIC", {"float64": _float64_gap}, "arithmetic")
