"""Prior shift (Ho 2.7.2, 3.5, 4.5): long-tailed test priors, Bayes correction of the
posteriors and importance weights, so no resampling of the test set is needed.

Under a prior shift p_test(x | y) = p_train(x | y), hence (eq. 3.36)
p_test(y | x) is proportional to p_train(y | x) p_test(y) / p_train(y), and an expectation
under the test distribution is the training expectation weighted by p_test(y) / p_train(y)
(eq. 3.37).
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError


def check_prior(prior, n_classes: int, where: str, positive: bool = False) -> np.ndarray:
    arr = np.asarray(prior, dtype=np.float64)
    if arr.shape != (n_classes,) or not np.isfinite(arr).all() or (arr < 0).any():
        raise CalbenchError(f"{where}: a prior must be {n_classes} non-negative numbers.")
    if abs(arr.sum() - 1) > 1e-6:
        raise CalbenchError(f"{where}: the prior sums to {arr.sum():.6g}, not 1.")
    if positive and (arr <= 0).any():
        raise CalbenchError(
            f"{where}: class {int(np.argmin(arr))} has prior 0 where the test prior is divided "
            "by it; every class needs calibration samples."
        )
    return arr


def power_law_prior(n_classes: int, k: float) -> np.ndarray:
    """p(r) proportional to r^-k over ranks r = 1..n (Ho 4.5: LTk1 k = 1, LTstronger k = 1.5)."""
    weights = np.arange(1, n_classes + 1, dtype=np.float64) ** -float(k)
    return weights / weights.sum()


def long_tail_prior(class_accuracy, k: float) -> np.ndarray:
    """The power law with its most common rank on the class the model gets most wrong."""
    accuracy = np.asarray(class_accuracy, dtype=np.float64)
    prior = np.empty(len(accuracy))
    prior[np.argsort(accuracy, kind="stable")] = power_law_prior(len(accuracy), k)
    return prior


def mixed_prior(train_prior, target_prior, eps: float) -> np.ndarray:
    """(1 - eps) p_train + eps p' (eq. 3.39)."""
    if not 0 <= eps <= 1:
        raise CalbenchError(f"prior shift: eps must lie in [0, 1]; got {eps}.")
    return (1 - eps) * np.asarray(train_prior) + eps * np.asarray(target_prior)


def adapt_posteriors(probs, train_prior, test_prior) -> np.ndarray:
    """Eq. 3.36: reweight each class by p_test(y) / p_train(y) and renormalise."""
    ratio = np.asarray(test_prior) / np.asarray(train_prior)
    adapted = np.asarray(probs) * ratio
    return adapted / adapted.sum(axis=1, keepdims=True)


def em_test_prior(probs, train_prior, tol=1e-6, max_iter=100, weights=None) -> np.ndarray:
    """The test prior of unlabelled test predictions by EM (Saerens et al. 2002), where Ho
    3.5 assumes it known: alternately adapt the posteriors to the current prior
    (`adapt_posteriors`) and take their mean as the next prior, from ``train_prior``.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        The calibrated posteriors p_train(y | x) of the test inputs.
    train_prior : array-like of shape (n_classes,)
        p_train(y); Alexandari et al. 2020 (and the abstention package) use the mean
        calibrated posterior of the calibration data, so that no shift is found there.
    tol : float
        Stop when no class's prior moves by more than ``tol`` in an iteration.
    max_iter : int
        The most iterations.
    weights : array-like of shape (n_samples,), optional
        Sample weights of the test inputs: the population they stand for, where a shift
        is simulated by importance weights instead of resampling (Ho eq. 3.37).

    Returns
    -------
    ndarray of shape (n_classes,)
        The estimated p_test(y); `adapt_posteriors` with it gives the adapted posteriors.
        The same iterations and stopping rule as abstention's ``EMImbalanceAdapter``.
    """
    probs = np.asarray(probs, dtype=np.float64)
    train = check_prior(train_prior, probs.shape[1], "em_test_prior", positive=True)
    current = train
    for _ in range(max_iter):
        following = np.average(adapt_posteriors(probs, train, current), axis=0, weights=weights)
        if not np.any(np.abs(following - current) > tol):
            break
        current = following
    return following


def bbse_weights(probs_test, probs_valid, y_valid, soft=False, weights=None) -> np.ndarray:
    """The ratios p_test(y) / p_train(y) by black-box shift estimation (Lipton et al. 2018):
    the solution ``w`` of ``C w = mu``, with ``C`` the joint frequencies of (prediction,
    label) on labelled validation data and ``mu`` the prediction frequencies on the test
    inputs; negative ratios are set to 0, as the abstention package does.

    Parameters
    ----------
    probs_test : array-like of shape (n_test, n_classes)
        Posteriors of the unlabelled test inputs.
    probs_valid : array-like of shape (n_valid, n_classes)
        Posteriors of labelled validation inputs from the training distribution.
    y_valid : array-like of shape (n_valid,)
        Their integer labels.
    soft : bool
        Count probabilities instead of argmax predictions (abstention's ``soft=True``).
    weights : array-like of shape (n_test,), optional
        Sample weights of the test inputs (see `em_test_prior`).

    Returns
    -------
    ndarray of shape (n_classes,)
        The estimated ratios; ``adapt_posteriors(p, prior, prior * w)`` adapts posteriors
        with them. Equal to abstention's ``BBSEImbalanceAdapter`` multipliers.
    """
    test = np.asarray(probs_test, dtype=np.float64)
    valid = np.asarray(probs_valid, dtype=np.float64)
    k = valid.shape[1]
    if not soft:  # argmax predictions, first class on ties
        test, valid = np.eye(k)[test.argmax(axis=1)], np.eye(k)[valid.argmax(axis=1)]
    joint = valid.T @ np.eye(k)[np.asarray(y_valid)] / len(valid)
    try:
        ratios = np.linalg.solve(joint, np.average(test, axis=0, weights=weights))
    except np.linalg.LinAlgError:
        raise CalbenchError(
            "bbse_weights: the validation confusion matrix is singular (a class is never "
            "predicted or never occurs); use soft=True or more validation data."
        ) from None
    return np.where(ratios >= 0, ratios, 0.0)


#: How a prior-shift cell learns the test prior it corrects for (``shift.estimate``):
#: told it (Ho), estimated by EM or BBSE, or not at all (``none``: no correction, the
#: baseline the estimates are to beat).
ESTIMATES = ("known", "em", "bbse", "none")


def estimated_ratios(estimate, probs, train_prior, weights, fit_probs=None, fit_y=None):
    """p_test(y) / p_train(y) as ``estimate`` finds it from the test posteriors ``probs``
    standing for the population weighted by ``weights``: EM (Saerens et al. 2002) from
    ``train_prior``, or BBSE (Lipton et al. 2018) with the calibrated posteriors of the
    calibration data (``fit_probs``, ``fit_y``) as its labelled validation set."""
    if estimate == "em":
        return em_test_prior(probs, train_prior, weights=weights) / np.asarray(train_prior)
    if estimate == "bbse":
        return bbse_weights(probs, fit_probs, fit_y, weights=weights)
    if estimate == "none":
        return np.ones(len(train_prior))
    raise CalbenchError(f"shift estimate {estimate!r}: choose one of {', '.join(ESTIMATES)}.")
