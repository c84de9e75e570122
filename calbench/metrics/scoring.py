"""Accuracy and the proper scoring rules."""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError
from calbench.metrics._checks import probs_and_labels
from calbench.metrics.binned import top_label
from calbench.simplex import TINY


def accuracy(probs, y) -> float:
    """Share of samples whose most probable class (first on ties) is the label.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        In [0, 1]; higher is better.
    """
    p, y = probs_and_labels(probs, y, "accuracy")
    return float(accuracy_terms(p, y).mean())


def accuracy_terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each sample's term of `accuracy` (validated ``p`` and ``y``): 1.0 where it is right."""
    return (p.argmax(axis=1) == y).astype(np.float64)


#: The smallest normal float32, probmetrics' floor on the probabilities it takes logs of.
FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def log_loss(probs, y, clip=None, floor=None) -> float:
    r"""Mean negative log-probability of the label, :math:`-\frac1n\sum_i \ln p_{i,y_i}`.

    Parameters
    ----------
    probs : ndarray of shape (n_samples, n_classes)
    y : ndarray of shape (n_samples,), integer labels
    clip : float or None
        None (default): a zero probability is clipped to the smallest float64 (2.2e-308, as
        Kull et al.'s calibrators), so a confidently wrong prediction costs about 708
        instead of infinity; nothing else changes. A float ``eps``: scikit-learn's
        ``log_loss`` before 1.5, which Kull et al.'s and Valk's tables were scored with
        (``eps=1e-15``): every probability clipped into [eps, 1 - eps] and each row
        renormalised. On DenseNet-40 CIFAR-10, uncalibrated, this gives the printed 0.428
        (Kull Table 4, Valk Table 8) where the exact value is 0.430: a few test labels have
        probability below 1e-15.
    floor : float, "float32" or None
        probmetrics' log-loss (CalArena's ``logloss``): ``ln p`` floored at ``ln floor``
        ("float32": the smallest normal float32, 1.18e-38, so a zero costs 87.3), then
        renormalised by a log-softmax over the row. None: see ``clip``.

    Returns
    -------
    float
        Lower is better; 0 only for certain, correct predictions.
    """
    p, y = probs_and_labels(probs, y, "log_loss")
    return float(log_loss_terms(p, y, clip, floor).mean())


def log_loss_terms(p: np.ndarray, y: np.ndarray, clip=None, floor=None) -> np.ndarray:
    """Each sample's term of `log_loss` (validated ``p`` and ``y``), which the bootstrap
    resamples."""
    rows = np.arange(len(y))
    if floor is not None:
        if clip is not None:
            raise CalbenchError("log_loss takes clip or floor, not both.")
        least = FLOAT32_TINY if floor == "float32" else _floor(floor)
        with np.errstate(divide="ignore"):
            z = np.maximum(np.log(p), np.log(least))
        top = z.max(axis=1, keepdims=True)
        return top[:, 0] + np.log(np.exp(z - top).sum(axis=1)) - z[rows, y]
    if clip is None:
        return -np.log(np.clip(p[rows, y], TINY, None))
    eps = float(clip)
    if not 0 < eps < 0.5:
        raise CalbenchError(f"The 'clip' parameter of log_loss must be in (0, 0.5). Got {clip!r}.")
    q = np.clip(p, eps, 1 - eps)
    return -np.log(q[rows, y] / q.sum(axis=1))


def brier(probs, y) -> float:
    r"""Multi-class Brier score :math:`\frac1n\sum_i\sum_j (p_{ij} - [y_i = j])^2`.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        In [0, 2]; lower is better. Sums over classes (scikit-learn's binary
        ``brier_score_loss`` is the one-class mean).
    """
    p, y = probs_and_labels(probs, y, "brier")
    return float(brier_terms(p, y).mean())


def brier_terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each sample's term of `brier` (validated ``p`` and ``y``)."""
    return (p**2).sum(axis=1) - 2 * p[np.arange(len(y)), y] + 1


def top1_brier(probs, y) -> float:
    r"""Top-1 Brier score (Gupta et al. Table 7): :math:`\frac1n\sum_i (\max_j p_{ij} -
    [\arg\max_j p_{ij} = y_i])^2`, the squared error of the confidence alone.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        In [0, 1]; lower is better.
    """
    p, y = probs_and_labels(probs, y, "top1_brier")
    return float(top1_brier_terms(p, y).mean())


def top1_brier_terms(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each sample's term of `top1_brier` (validated ``p`` and ``y``)."""
    confidence, correct = top_label(p, y)
    return (confidence - correct) ** 2


def confidence_variance(probs, y=None) -> float:
    """Variance of the confidences ``max_j p_ij`` (Hoki Fig. 3 plots log ECE against it).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,) or None
        Only checked when given.

    Returns
    -------
    float
        The population variance (``ddof=0``).
    """
    p, _ = probs_and_labels(
        probs, np.zeros(len(probs), dtype=int) if y is None else y, "confidence_variance"
    )
    return float(p.max(axis=1).var())


#: A true-class probability below this is a certainty the label refuted: each such row adds
#: more than 20.7 nats to the summed log-loss.
REFUTED_BELOW = 1e-9
#: What one such row costs, in the words every table, leaderboard and page uses.
REFUTED_COST = f"each adding over {-np.log(REFUTED_BELOW):.1f} nats to its summed log-loss"
#: How tables (and a run's note) mark a cell with such rows (`calbench.tables.certainties`).
REFUTED_MARK = "‡"
#: The mark of a value whose cell's fit stopped before converging in some fold (row
#: ``fit_unconverged``, `calbench.calibrators.base.Calibrator.unconverged`).
UNCONVERGED_MARK = "§"


def wrong_certainties(probs, y, below=REFUTED_BELOW) -> float:
    """How many rows gave their label a probability below ``below``: certainties the data
    refuted, which dominate a log-loss (a probability of exactly 0 makes it about 708 per
    row). Stored with every cell; tables mark the cells that have any.

    Parameters
    ----------
    probs : ndarray of shape (n_samples, n_classes)
    y : ndarray of shape (n_samples,), integer labels
    below : float

    Returns
    -------
    float
        A count; 0 for calibrators that bound their outputs
        (`calbench.calibrators.bounds`).
    """
    p, y = probs_and_labels(probs, y, "wrong_certainties")
    return float((p[np.arange(len(y)), y] < below).sum())


def _floor(floor) -> float:
    """A floor given as a number: one in (0, 1) ("float16" was "could not convert string
    to float", naming no parameter)."""
    try:
        least = float(floor)
    except (TypeError, ValueError):
        least = np.nan
    if not 0 < least < 1:
        raise CalbenchError(
            f'log_loss: floor must be a probability in (0, 1) or "float32"; got {floor!r}.'
        )
    return least
