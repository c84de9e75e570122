"""Calibration tests by consistency resampling (Vaicenavicius et al. 2019; Kull 2, 4.1; Ho 2.5.7).

Under the hypothesis that the predictions are calibrated, labels are draws from them. The
p-value of an observed ECE is the share of ``n_resamples`` pseudo-label sets, drawn from
the predictions themselves, whose ECE is at least as high (Kull et al.: 170 of 10,000 gave
p = 0.017). Bins depend on the predictions only, so they are computed once; each resample
only changes the per-bin label sums:

- confidence-ECE: whether the top class is the pseudo-label is Bernoulli(max p);
- classwise-ECE: one categorical pseudo-label per sample, counted into the bin that sample's
  probability of that class falls in (one ``bincount`` per chunk of resamples).

Seeded through ``numpy.random.default_rng(seed)``; resamples are processed in chunks.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import check_choice, check_int
from calbench.metrics._checks import probs_and_labels
from calbench.metrics.binned import BINNINGS, bin_indices, classwise_ece, confidence_ece

# Pseudo-label draws per chunk (chunk of resamples x samples).
_CHUNK_DRAWS = 2_000_000


def _ece_from_sums(counts, mean_score, outcome_sums, n):
    """ECE (alpha = 1) of several outcome-sum vectors over fixed bins: (..., bins) -> (...)."""
    filled = counts > 0
    frac = np.where(filled, outcome_sums / np.where(filled, counts, 1.0), 0.0)
    gaps = np.abs(frac - np.where(filled, mean_score, 0.0)) * filled
    return (gaps * counts).sum(axis=-1) / n


def _chunks(n_resamples, n):
    size = max(1, _CHUNK_DRAWS // n)
    for start in range(0, n_resamples, size):
        yield min(size, n_resamples - start)


def _checked(probs, y, owner, n_resamples, binning):
    check_int(n_resamples, "n_resamples", owner)
    check_choice(binning, "binning", owner, BINNINGS)
    return probs_and_labels(probs, y, owner)


def confidence_ece_p_value(
    probs, y, n_bins=15, binning="equal_width", n_resamples=10_000, seed=0
) -> float:
    """p-value of the confidence-ECE under the hypothesis of calibration, by consistency
    resampling (Vaicenavicius et al. 2019; module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Number of bins.
    binning : {"equal_width", "equal_size", "equal_size_stable", "digitize"}
        See the module docstring.
    n_resamples : int
        Pseudo-label sets drawn from the predictions.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    float
        The share of resampled ECEs at least the observed one, in [0, 1].
    """
    p, y = _checked(probs, y, "confidence_ece_p_value", n_resamples, binning)
    observed = confidence_ece(p, y, n_bins=n_bins, binning=binning)
    confidence = p.max(axis=1)
    bins = bin_indices(confidence, n_bins, binning)
    counts = np.bincount(bins, minlength=n_bins).astype(np.float64)
    sums = np.bincount(bins, weights=confidence, minlength=n_bins)
    mean_score = np.divide(sums, counts, out=np.zeros(n_bins), where=counts > 0)
    one_hot = np.zeros((len(p), n_bins))
    one_hot[np.arange(len(p)), bins] = 1.0
    rng = np.random.default_rng(seed)
    exceed = 0
    for size in _chunks(n_resamples, len(p)):
        correct = (rng.random((size, len(p))) < confidence).astype(np.float64)
        ece = _ece_from_sums(counts, mean_score, correct @ one_hot, len(p))
        exceed += int((ece >= observed - 1e-15).sum())
    return exceed / n_resamples


def classwise_ece_p_value(
    probs, y, n_bins=15, binning="equal_width", n_resamples=10_000, seed=0
) -> float:
    """p-value of the classwise-ECE under the hypothesis of calibration, by consistency
    resampling (Kull et al. 2019, sec. 4.1; module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    n_bins : int
        Number of bins.
    binning : {"equal_width", "equal_size", "equal_size_stable", "digitize"}
        See the module docstring.
    n_resamples : int
        Pseudo-label sets drawn from the predictions.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    float
        The share of resampled ECEs at least the observed one, in [0, 1].
    """
    p, y = _checked(probs, y, "classwise_ece_p_value", n_resamples, binning)
    n, k = p.shape
    observed = classwise_ece(p, y, n_bins=n_bins, binning=binning)
    bins = np.column_stack([bin_indices(p[:, j], n_bins, binning) for j in range(k)])
    flat_bin = np.arange(k) * n_bins + bins  # (n, k): slot of sample i's class-j score
    counts = np.bincount(flat_bin.ravel(), minlength=k * n_bins).astype(np.float64)
    sums = np.bincount(flat_bin.ravel(), weights=p.ravel(), minlength=k * n_bins)
    mean_score = np.divide(sums, counts, out=np.zeros(k * n_bins), where=counts > 0)
    counts, mean_score = counts.reshape(k, n_bins), mean_score.reshape(k, n_bins)
    # Inverse-CDF sampling of all rows at once: offsetting row i's CDF by i makes the
    # concatenated CDFs increasing, so one searchsorted serves every row.
    cdf = np.cumsum(p, axis=1)
    cdf[:, -1] = 1.0
    flat_cdf = (cdf + np.arange(n)[:, None]).ravel()
    rng = np.random.default_rng(seed)
    exceed = 0
    for size in _chunks(n_resamples, n):
        draws = rng.random((size, n)) + np.arange(n)
        labels = np.searchsorted(flat_cdf, draws, side="right") - np.arange(n) * k
        labels = np.minimum(labels, k - 1)
        slots = flat_bin[np.arange(n), labels] + (np.arange(size) * k * n_bins)[:, None]
        outcome = np.bincount(slots.ravel(), minlength=size * k * n_bins)
        ece = _ece_from_sums(counts, mean_score, outcome.reshape(size, k, n_bins), n)
        exceed += int((ece.mean(axis=1) >= observed - 1e-15).sum())
    return exceed / n_resamples


def confidence_ece_accepted(probs, y, alpha=0.05, **options) -> float:
    """1.0 where the confidence test does not reject calibration at ``alpha``, else 0.0;
    averaged over outer folds, Kull et al.'s p-conf-ECE.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    alpha : float
        The test's level.
    **options
        Passed to `confidence_ece_p_value`.

    Returns
    -------
    float
        1.0 or 0.0; higher is better.
    """
    return float(confidence_ece_p_value(probs, y, **options) >= alpha)


def classwise_ece_accepted(probs, y, alpha=0.05, **options) -> float:
    """1.0 where the classwise test does not reject calibration at ``alpha``, else 0.0;
    averaged over outer folds, Kull et al.'s p-cw-ECE.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    alpha : float
        The test's level.
    **options
        Passed to `classwise_ece_p_value`.

    Returns
    -------
    float
        1.0 or 0.0; higher is better.
    """
    return float(classwise_ece_p_value(probs, y, **options) >= alpha)
