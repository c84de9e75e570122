r"""The Brier score's decomposition into reliability, resolution and uncertainty (Murphy
1973), in the exact binned form of Stephenson, Coelho and Jolliffe (2008).

The multi-class Brier score is a sum over classes of binary Brier scores of the forecasts
:math:`f = p_j` against :math:`o = [y = j]`. Per class, with the forecasts grouped into
bins :math:`b` of :math:`n_b` samples, bin means :math:`\bar f_b, \bar o_b` and base rate
:math:`\bar o`:

.. math::

    \mathrm{BS} = \underbrace{\tfrac1n \textstyle\sum_b n_b (\bar f_b - \bar o_b)^2}_{\text{REL}}
    - \underbrace{\tfrac1n \textstyle\sum_b n_b (\bar o_b - \bar o)^2}_{\text{RES}}
    + \underbrace{\bar o (1 - \bar o)}_{\text{UNC}}
    + \underbrace{\tfrac1n \textstyle\sum_i (f_i - \bar f_{b_i})^2
      - \tfrac2n \textstyle\sum_i (o_i - \bar o_{b_i})(f_i - \bar f_{b_i})}_{\text{within bins}}

exactly, for any binning (Stephenson et al. eq. 9: WBV - WBC). Murphy's three terms are the
whole story only where the forecasts are constant within bins; the within-bin term says how
far binning is from that. Each metric below sums its term over the classes, so the four add
up to ``brier``.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics._checks import probs_and_labels
from calbench.metrics.binned import bin_indices

TERMS = ("reliability", "resolution", "uncertainty", "within_bins")


def brier_decomposition(probs, y, n_bins: int = 10, binning: str = "equal_width") -> dict:
    """The four terms (module docstring), each summed over the classes: a dict keyed by
    `TERMS`; ``reliability - resolution + uncertainty + within_bins`` is the Brier score."""
    p, y = probs_and_labels(probs, y, "brier_decomposition")
    n, k = p.shape
    outcomes = np.arange(k)[None, :] == y[:, None]
    terms = dict.fromkeys(TERMS, 0.0)
    for j in range(k):
        f, o = p[:, j], outcomes[:, j].astype(np.float64)
        bins = bin_indices(f, n_bins, binning)
        counts = np.bincount(bins, minlength=n_bins).astype(np.float64)
        used = counts > 0
        mean_f = np.bincount(bins, weights=f, minlength=n_bins)[used] / counts[used]
        mean_o = np.bincount(bins, weights=o, minlength=n_bins)[used] / counts[used]
        base = o.mean()
        spread_f = f - _at(mean_f, used, bins)
        spread_o = o - _at(mean_o, used, bins)
        terms["reliability"] += float((counts[used] * (mean_f - mean_o) ** 2).sum() / n)
        terms["resolution"] += float((counts[used] * (mean_o - base) ** 2).sum() / n)
        terms["uncertainty"] += float(base * (1 - base))
        terms["within_bins"] += float((spread_f**2).mean() - 2 * (spread_o * spread_f).mean())
    return terms


def _at(means_of_used, used, bins):
    """Each sample's bin mean, from the means of the non-empty bins."""
    full = np.zeros(len(used))
    full[used] = means_of_used
    return full[bins]


def _term(name, doc):
    def metric(probs, y, n_bins: int = 10, binning: str = "equal_width") -> float:
        return brier_decomposition(probs, y, n_bins, binning)[name]

    metric.__name__ = f"brier_{name}"
    metric.__doc__ = doc + _PARAMETERS
    return metric


_PARAMETERS = """

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Bins of each class's forecasts.
    binning : {"equal_width", "equal_size"}
        Equal-width bins of [0, 1], or bins of equal count.

    Returns
    -------
    float
        Summed over the classes; the four terms add up to ``brier``
        (`calbench.metrics.decomposition`, Stephenson et al. 2008).
    """

brier_reliability = _term(
    "reliability",
    "Murphy's reliability: the bins' squared gaps between mean forecast and frequency; "
    "lower is better.",
)
brier_resolution = _term(
    "resolution",
    "Murphy's resolution: how far the bins' frequencies spread from the base rate; higher "
    "is better.",
)
brier_uncertainty = _term(
    "uncertainty", "Murphy's uncertainty: the base rates' variance, the same for every method."
)
brier_within_bins = _term(
    "within_bins",
    "Stephenson et al.'s within-bin variance minus covariance: the binning's share of the "
    "Brier score, 0 where forecasts are constant within bins.",
)
