r"""True calibration errors where the calibration map is known (synthetic data; Valk 2.3, 4.1).

``true_probs`` is ``E[Y | P = p]`` evaluated at each sample's *uncalibrated* prediction; for
an injective calibration map ĉ this is also ``E[Y | ĉ(P)]``, so the error of ĉ(p) is measured
against it directly, with no binning:

.. math::

    CE_{conf} = \Big(\tfrac1n \sum_i |\hat c_{i,t_i} - c_{i,t_i}|^\alpha\Big)^{1/\alpha},
    \quad t_i = \arg\max_j \hat c_{ij},
    \qquad
    CE_{cw} = \tfrac1k \sum_j \Big(\tfrac1n \sum_i |\hat c_{ij} - c_{ij}|^\alpha\Big)^{1/\alpha}.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import check_choice
from calbench.metrics._checks import probs_pair


def true_confidence_ce(probs, true_probs, alpha=1) -> float:
    r"""True confidence calibration error against the known map (Valk 4.1; module
    docstring): no binning, 0 for the true map.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    true_probs : array-like of shape (n_samples, n_classes)
        The known ``E[Y | P]`` at each sample (synthetic data).
    alpha : {1, 2}
        Order of the norm: 1 the usual ECE, 2 the root of the weighted squared gaps.

    Returns
    -------
    float
        Lower is better.
    """
    check_choice(alpha, "alpha", "true_confidence_ce", (1, 2))
    p, c = probs_pair(probs, true_probs, "true_probs", "true_confidence_ce")
    gaps = true_confidence_ce_terms(p, c) ** alpha
    return float(gaps.mean() ** (1.0 / alpha))


def true_confidence_ce_terms(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Each sample's gap ``|p_top - c_top|`` at its top class (validated ``p`` and ``c``),
    whose mean is `true_confidence_ce` with ``alpha=1``."""
    rows = np.arange(len(p))
    top = p.argmax(axis=1)
    return np.abs(p[rows, top] - c[rows, top])


def true_classwise_ce(probs, true_probs, alpha=1) -> float:
    r"""True classwise calibration error against the known map (Valk 4.1; module
    docstring): the per-class errors averaged, 0 for the true map.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    true_probs : array-like of shape (n_samples, n_classes)
        The known ``E[Y | P]`` at each sample (synthetic data).
    alpha : {1, 2}
        Order of the norm: 1 the usual ECE, 2 the root of the weighted squared gaps.

    Returns
    -------
    float
        Lower is better.
    """
    check_choice(alpha, "alpha", "true_classwise_ce", (1, 2))
    p, c = probs_pair(probs, true_probs, "true_probs", "true_classwise_ce")
    per_class = (np.abs(p - c) ** alpha).mean(axis=0) ** (1.0 / alpha)
    return float(per_class.mean())
