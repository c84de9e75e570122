"""Decision metrics: the average loss gap (Zhao et al.; Valk 2.6, 4.1) and empirical risk."""

from __future__ import annotations

import numpy as np

from calbench.decision import check_loss_matrix, risk
from calbench.errors import CalbenchError, check_choice, check_int
from calbench.metrics._checks import probs_and_labels, probs_pair
from calbench.packs import PackRegistry

# Losses per chunk: keeps each (n, chunk) array near 40 MB at n = 100000.
_CHUNK = 50


def average_loss_gap(
    probs, y=None, *, true_probs=None, n_losses=500, n_decisions=2, seed=0, draws="default_rng"
) -> float:
    r"""Mean over random losses of ``|predicted expected loss - true expected loss|``.

    Each loss matrix ``L`` (k x n_decisions) has i.i.d. N(0, 1) entries, drawn from
    ``numpy.random.default_rng(seed)`` so every method is scored on the same losses (or by
    a draw rule a paper pack brings, `LOSS_DRAWS`: ``draws="valk"``, the very matrices of
    Valk's tables, in ``calbench.papers.valk2022``). With
    Bayes decisions :math:`d_i = \arg\min_d (p_i L)_d`:

    .. math::

        \mathrm{gap}(L) = \Big|\frac1n\sum_i (p_i L)_{d_i} - \frac1n\sum_i L_{y_i, d_i}\Big|

    When ``true_probs`` (the known ``E[Y | P]``) is given, the second term is the exact
    expectation :math:`\frac1n\sum_i (c_i L)_{d_i}` instead of the label average (Valk 4.1).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,) or None
        Integer labels; not needed where ``true_probs`` is given.
    true_probs : array-like of shape (n_samples, n_classes) or None
        The known ``E[Y | P]`` at each sample (synthetic data).
    n_losses : int
        Random loss matrices averaged over.
    n_decisions : int
        Actions of each loss matrix (Valk: 2).
    seed : int
    draws : str
        How the matrices are drawn: ``"default_rng"``, or a rule of `LOSS_DRAWS`.

    Returns
    -------
    float
        Lower is better.
    """
    check_int(n_losses, "n_losses", "average_loss_gap")
    check_int(n_decisions, "n_decisions", "average_loss_gap", minimum=2)
    labels = target = None
    if true_probs is not None:
        p, target = probs_pair(probs, true_probs, "true_probs", "average_loss_gap")
    elif y is not None:
        p, labels = probs_and_labels(probs, y, "average_loss_gap")
    else:
        raise CalbenchError("average_loss_gap needs labels y or true_probs.")
    losses = _random_losses(p.shape[1], n_losses, n_decisions, seed, draws)
    k = p.shape[1]
    chunks = [losses[s : s + _CHUNK] for s in range(0, n_losses, _CHUNK)]
    if n_decisions == 2:
        if target is None:  # the labels one-hot, once for every chunk
            target = np.eye(k, dtype=p.dtype)[labels]
        gaps = [_two_decision_gaps(p, chunk, target) for chunk in chunks]
    else:
        gaps = [_gaps(p, chunk, labels, target) for chunk in chunks]
    return float(np.concatenate(gaps).mean())


def _random_losses(k, n_losses, n_decisions, seed, draws) -> np.ndarray:
    """The (n_losses, k, n_decisions) loss matrices `average_loss_gap` averages over."""
    check_choice(draws, "draws", "average_loss_gap", tuple(LOSS_DRAWS))
    return LOSS_DRAWS[draws](k, n_losses, n_decisions, seed)


def _default_rng_losses(k, n_losses, n_decisions, seed) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n_losses, k, n_decisions))


#: How `average_loss_gap` draws its (n_losses, k, n_decisions) matrices from a seed; a paper
#: pack brings its own rule (its ``LOSS_DRAWS``), so its tables' very matrices are used.
LOSS_DRAWS = PackRegistry("LOSS_DRAWS", {"default_rng": _default_rng_losses}, "loss draw")


def loss_gap_terms(
    probs, y=None, *, true_probs=None, n_losses=500, n_decisions=2, seed=0, draws="default_rng"
) -> np.ndarray:
    """Per sample and loss, the predicted minus the true loss of the Bayes decision:
    (n_samples, n_losses), whose column means' absolute values `average_loss_gap`
    averages (the bootstrap resamples its rows)."""
    p = np.asarray(probs, dtype=np.float64)
    target = None if true_probs is None else np.asarray(true_probs, dtype=np.float64)
    losses = _random_losses(p.shape[1], n_losses, n_decisions, seed, draws)
    terms = np.empty((len(p), n_losses))
    for d in range(n_decisions):
        costs = losses[:, :, d].T  # (k, n_losses)
        predicted = p @ costs
        true = target @ costs if target is not None else costs[np.asarray(y)]
        if d == 0:
            best = predicted
            terms[:] = predicted - true
        else:
            better = predicted < best
            best = np.where(better, predicted, best)
            terms = np.where(better, predicted - true, terms)
    return terms


def _gaps(p, chunk, labels, target):
    """The loss gaps of a chunk of losses (chunk, k, decisions), against the label
    average (``labels``) or the exact expectation under ``target``."""
    # Decision-major layout, so the Bayes rule is a running minimum over a few
    # contiguous (n, chunk) arrays; ties keep the first decision, as argmin does.
    best_pred = best_true = None
    for d in range(chunk.shape[2]):
        costs = chunk[:, :, d].T  # (k, chunk)
        pred = p @ costs
        true = target @ costs if target is not None else costs[labels]
        if best_pred is None:
            best_pred, best_true = pred, true
        else:
            better = pred < best_pred
            best_pred = np.where(better, pred, best_pred)
            best_true = np.where(better, true, best_true)
    return np.abs(best_pred.mean(axis=0) - best_true.mean(axis=0))


def _two_decision_gaps(p, chunk, target):
    r"""`_gaps` for two decisions in a few passes over the (n, chunk) arrays (Valk's
    experiments). With :math:`s_i = p_i (L_0 - L_1)`, decision 1 is taken where
    :math:`s_i > 0` (ties keep decision 0), so the mean predicted loss is
    :math:`\bar p L_0 - \overline{[s > 0]\, p (L_0 - L_1)}` and the true one
    :math:`\bar t L_0 - \overline{[s > 0]\, t (L_0 - L_1)}`, with ``t`` (``target``) the
    true probabilities or the one-hot labels. Both masked sums are (k, n) x (n, chunk)
    matrix products with the switch mask, so only ``s`` and the mask are ever (n, chunk)."""
    first, delta = chunk[:, :, 0].T, (chunk[:, :, 0] - chunk[:, :, 1]).T  # (k, chunk)
    n = len(p)
    switch = (p @ delta > 0).astype(p.dtype)  # (n, chunk)
    predicted = p.mean(axis=0) @ first - ((p.T @ switch) * delta).sum(axis=0) / n
    true = target.mean(axis=0) @ first - ((target.T @ switch) * delta).sum(axis=0) / n
    return np.abs(predicted - true)


def _checked_loss(p, loss_matrix, owner):
    return check_loss_matrix(loss_matrix, p.shape[1], owner)


def empirical_risk(probs, y, *, loss_matrix, reduction="mean", shift_weights=None) -> float:
    """Loss of the Bayes decisions ``argmin_d (p_i L)_d`` under ``loss_matrix`` against the
    labels, averaged (or summed) over samples (Ho eqs. 2.18-2.20).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    loss_matrix : array-like of shape (n_classes, n_actions)
        ``L[y, d]``, the cost of action d when the label is y.
    reduction : {"mean", "sum"}
        Average or sum over the samples.
    shift_weights : dict or None
        A prior shift's importance weights (`calbench.runner.decision_task`); None: none.

    Returns
    -------
    float
        Lower is better. Under a prior shift each sample is weighted by its
        label's ``p_test(y) / p_train(y)`` (Ho eq. 3.37).
    """
    p, y = probs_and_labels(probs, y, "empirical_risk")
    matrix = _checked_loss(p, loss_matrix, "empirical_risk")
    weights = None if shift_weights is None else np.asarray(shift_weights["labels"])[y]
    return risk.empirical_risk(p, y, matrix, reduction=reduction, weights=weights)


def model_risk(probs, y, *, loss_matrix, reduction="mean", shift_weights=None) -> float:
    """The loss the model expects of its own Bayes decisions, ``min_d (p_i L)_d``, averaged
    (or summed); ``y`` is only checked.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    loss_matrix : array-like of shape (n_classes, n_actions)
        ``L[y, d]``, the cost of action d when the label is y.
    reduction : {"mean", "sum"}
        Average or sum over the samples.
    shift_weights : dict or None
        A prior shift's importance weights (`calbench.runner.decision_task`); None: none.

    Returns
    -------
    float
        Under a prior shift each input is weighted by ``p_test(x) / p_train(x) =
        sum_y p_train(y | x) p_test(y) / p_train(y)`` (Ho eq. 3.38).
    """
    p, _ = probs_and_labels(probs, y, "model_risk")
    weights = None if shift_weights is None else shift_weights["inputs"]
    matrix = _checked_loss(p, loss_matrix, "model_risk")
    return risk.model_risk(p, matrix, reduction=reduction, weights=weights)


def risk_gap(probs, y, *, loss_matrix, shift_weights=None) -> float:
    """``|model risk - empirical risk|``: how far the model misjudges its own decisions'
    cost (Ho Figs. 4.i-4.k).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    loss_matrix : array-like of shape (n_classes, n_actions)
    shift_weights : dict or None
        A prior shift's importance weights (`calbench.runner.decision_task`); None: none.

    Returns
    -------
    float
        Lower is better.
    """
    return abs(
        model_risk(probs, y, loss_matrix=loss_matrix, shift_weights=shift_weights)
        - empirical_risk(probs, y, loss_matrix=loss_matrix, shift_weights=shift_weights)
    )


def argmax_changed(probs, reference_probs) -> float:
    """Share of samples whose most probable class differs from the reference's.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    reference_probs : array-like of shape (n_samples, n_classes)
        Usually the uncalibrated predictions.

    Returns
    -------
    float
        In [0, 1]: 0 for a map that keeps every decision (an accuracy-preserving one).
    """
    p, q = probs_pair(probs, reference_probs, "reference_probs", "argmax_changed")
    return float(argmax_changed_terms(p, q).mean())


def argmax_changed_terms(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Each sample's term of `argmax_changed` (validated ``p`` and ``q``)."""
    return (p.argmax(axis=1) != q.argmax(axis=1)).astype(np.float64)
