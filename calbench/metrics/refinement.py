r"""The calibration-refinement split of a proper loss (Berta et al. 2025, "Rethinking early
stopping: refine, then calibrate"), as ``probmetrics`` computes it with its ``ts-mix_all``
estimator.

The refinement part is the loss left after the best temperature scaling of the predictions
themselves: temperature scaling fitted on the scored predictions (their log-probabilities
as logits), its output mixed with the uniform distribution at weight :math:`1/(n+1)`; the
calibration part is what that removes:

.. math::

    \mathrm{cal}(p) = \ell(p) - \ell(\mathrm{TS}_p(p)), \qquad
    \mathrm{ref}(p) = \ell(\mathrm{TS}_p(p)),

for the log-loss and the Brier score. The temperature is found as probmetrics does, by
bisection of the log-loss gradient over the log inverse temperature in [-16, 16], here in
float64 with 60 halvings where probmetrics takes 30 in float32.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics._checks import probs_and_labels
from calbench.metrics.scoring import brier, log_loss
from calbench.simplex import TINY, softmax

_HALVINGS = 60


def temperature_scaled_on_itself(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``p`` after temperature scaling fitted on (p, y) and mixed with the uniform
    distribution at 1/(n+1) (probmetrics' ``ts-mix``)."""
    scores = np.log(np.clip(p, TINY, None))
    rows = np.arange(len(y))

    def slope(log_inverse):  # d/dbeta of the mean log-loss of softmax(beta * scores)
        q = softmax(np.exp(log_inverse) * scores)
        return float(((q * scores).sum(axis=1) - scores[rows, y]).mean())

    low, high = -16.0, 16.0
    for _ in range(_HALVINGS):
        middle = (low + high) / 2
        if slope(middle) > 0:
            high = middle
        else:
            low = middle
    mix = 1.0 / (len(y) + 1)
    return (1 - mix) * softmax(np.exp((low + high) / 2) * scores) + mix / p.shape[1]


def _split(probs, y, loss, owner):
    p, y = probs_and_labels(probs, y, owner)
    refined = loss(temperature_scaled_on_itself(p, y), y)
    return loss(p, y) - refined, refined


def calibration_log_loss(probs, y) -> float:
    """The calibration part of the log-loss: what temperature scaling fitted on the scored
    predictions themselves removes (module docstring; Berta et al. 2025).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        Lower is better; near 0 (it can be slightly negative, as the mixture costs a
        little) when no temperature improves the predictions. Equal to probmetrics'
        ``calib-err_logloss_ts-mix_all`` (tests/metrics/test_metrics.py).
    """
    return _split(probs, y, log_loss, "calibration_log_loss")[0]


def refinement_log_loss(probs, y) -> float:
    """The refinement part of the log-loss: the log-loss after temperature scaling fitted on
    the scored predictions themselves (module docstring; Berta et al. 2025).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        Lower is better; probmetrics' ``refinement_logloss_ts-mix_all``.
    """
    return _split(probs, y, log_loss, "refinement_log_loss")[1]


def calibration_brier(probs, y) -> float:
    """The calibration part of the Brier score, as `calibration_log_loss` (the temperature
    is still fitted on the log-loss, as probmetrics does).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        Lower is better; probmetrics' ``calib-err_brier_ts-mix_all``.
    """
    return _split(probs, y, brier, "calibration_brier")[0]


def refinement_brier(probs, y) -> float:
    """The refinement part of the Brier score: the Brier score after temperature scaling
    fitted (on the log-loss) on the scored predictions themselves.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.

    Returns
    -------
    float
        Lower is better; probmetrics' ``refinement_brier_ts-mix_all``.
    """
    return _split(probs, y, brier, "refinement_brier")[1]
