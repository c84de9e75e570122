r"""Squared kernel calibration error (Widmann, Lindsten and Zachariah 2019, "Calibration
tests in multi-class classification: a unifying framework").

With the matrix-valued kernel :math:`k(p, p') = \kappa(p, p')\, I_K`,
:math:`\kappa(p, p') = \exp(-\lVert p - p'\rVert_2 / \nu)` (the paper's choice), the
SKCE is :math:`\mathbb E\, h(Z, Z')` for two independent samples, with

.. math::

    h\big((p, y), (p', y')\big) = \kappa(p, p')\, \langle e_y - p,\; e_{y'} - p'\rangle,

0 exactly when the predictions are calibrated. Its estimators (Widmann et al.):

- ``unbiased``: :math:`\widehat{\mathrm{SKCE}}_{uq} = \binom n2^{-1} \sum_{i<j} h_{ij}`,
  computed in blocks of rows so that no n x n x K array is held;
- ``linear``: :math:`\widehat{\mathrm{SKCE}}_{ul} = \lfloor n/2\rfloor^{-1}
  \sum_i h_{2i-1, 2i}`, linear time, more variance.

Both can be negative. The bandwidth :math:`\nu` is a number, or ``"median"``: the median
heuristic the paper uses, the median Euclidean distance between the predictions of distinct
samples, taken over at most 2,000 evenly spaced rows so that it costs no n^2 for large n
(the kernel depends on the predictions alone, so a test on it stays valid).

Calibration tests (`skce_p_value`), one-sided as the SKCE is 0 under calibration and
positive otherwise:

- ``linear``: the pairs' terms are i.i.d. with mean 0 under calibration, so the
  studentised mean is asymptotically normal (the paper's test of the linear estimator);
  :math:`p = 1 - \Phi(\sqrt m\, \bar h / s)`;
- ``unbiased``: consistency resampling (Vaicenavicius et al. 2019) in place of the
  paper's bounds: the share of ``n_resamples`` label sets drawn from the predictions
  themselves whose unbiased SKCE, under the same kernel, is at least the observed one. Its
  cost is O(n^2 K) per resample; the module computes the resampled statistics together,
  since only the label terms change (``_resampled_unbiased``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial.distance import cdist, pdist

from calbench.errors import CalbenchError, check_choice, check_int
from calbench.metrics._checks import probs_and_labels

ESTIMATORS = ("unbiased", "linear")
#: Rows whose pairwise distances give the median heuristic.
_MEDIAN_ROWS = 2000
#: Entries of one block of the kernel (rows x samples) or of a block of resamples.
_BLOCK = 1_000_000


def bandwidth_of(p: np.ndarray, bandwidth, owner: str) -> float:
    """The kernel's bandwidth: a positive number, or the median heuristic (module
    docstring); 1 where every prediction is the same (the kernel is then 1 for any)."""
    if isinstance(bandwidth, str):
        check_choice(bandwidth, "bandwidth", owner, ("median",))
        rows = np.unique(np.linspace(0, len(p) - 1, min(len(p), _MEDIAN_ROWS)).astype(int))
        distances = pdist(p[rows]) if len(rows) > 1 else np.zeros(1)
        median = float(np.median(distances))
        return median if median > 0 else 1.0
    if isinstance(bandwidth, bool) or not np.isscalar(bandwidth) or not bandwidth > 0:
        raise CalbenchError(
            f"The 'bandwidth' parameter of {owner} must be 'median' or a number > 0. "
            f"Got {bandwidth!r} instead."
        )
    return float(bandwidth)


def _kernel_blocks(p: np.ndarray, nu: float):
    """(start, kappa[start:stop, :]) over blocks of rows."""
    size = max(1, _BLOCK // len(p))
    for start in range(0, len(p), size):
        yield start, np.exp(-cdist(p[start : start + size], p) / nu)


def _checked(probs, y, owner, estimator, bandwidth, minimum=2):
    check_choice(estimator, "estimator", owner, ESTIMATORS)
    p, y = probs_and_labels(probs, y, owner)
    if len(p) < minimum:
        raise CalbenchError(f"{owner} needs at least {minimum} samples; got {len(p)}.")
    return p, y, bandwidth_of(p, bandwidth, owner)


def _unbiased(p: np.ndarray, y: np.ndarray, nu: float) -> float:
    """The unbiased SKCE, summing h over blocks of rows of the kernel."""
    n = len(p)
    total = 0.0
    for start, kappa in _kernel_blocks(p, nu):
        stop = start + len(kappa)
        ya, pa = y[start:stop], p[start:stop]
        # <e_yi - p_i, e_yj - p_j> = [y_i = y_j] - p_i[y_j] - p_j[y_i] + <p_i, p_j>
        inner = (ya[:, None] == y[None, :]) - pa[:, y] - p[:, ya].T + pa @ p.T
        total += float((kappa * inner).sum())
    residual = np.eye(p.shape[1])[y] - p
    diagonal = float((residual**2).sum())  # kappa(p, p) = 1
    return (total - diagonal) / (n * (n - 1))


def _linear_terms(p: np.ndarray, y: np.ndarray, nu: float) -> np.ndarray:
    """h of the pairs (0, 1), (2, 3), ... (an odd last sample is left out)."""
    m = len(p) // 2
    residual = np.eye(p.shape[1])[y] - p
    first, second = slice(0, 2 * m, 2), slice(1, 2 * m, 2)
    kappa = np.exp(-np.linalg.norm(p[first] - p[second], axis=1) / nu)
    return kappa * (residual[first] * residual[second]).sum(axis=1)


def skce(probs, y, estimator="unbiased", bandwidth="median") -> float:
    r"""Widmann et al.'s (2019) squared kernel calibration error with the exponential
    kernel times the identity (module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    estimator : {"unbiased", "linear"}
        The unbiased quadratic-time estimator or the linear-time one.
    bandwidth : "median" or float
        The kernel's bandwidth nu, or the median heuristic.

    Returns
    -------
    float
        Lower is better; 0 in expectation for calibrated predictions, so it can be
        negative; in [-2, 2].
    """
    p, y, nu = _checked(probs, y, "skce", estimator, bandwidth)
    if estimator == "linear":
        return float(_linear_terms(p, y, nu).mean())
    return _unbiased(p, y, nu)


def _draw(cumulative: np.ndarray, size: int, rng) -> np.ndarray:
    """(n, size) labels, each row's drawn from its categorical distribution."""
    u = rng.random((len(cumulative), size, 1))
    return (cumulative[:, None, :] > u).argmax(axis=2)


def _resampled_unbiased(p, nu, n_resamples, rng) -> np.ndarray:
    """The unbiased SKCE of ``n_resamples`` label sets drawn from ``p``, under one kernel.

    Only the label terms of h change between resamples: with M = (kappa - I) P, the sum of
    h over i != j is sum_{i!=j} kappa_ij [l_i = l_j] - 2 sum_i M[i, l_i] + a constant."""
    n, k = p.shape
    m_matrix, constant = np.zeros((n, k)), 0.0
    for start, kappa in _kernel_blocks(p, nu):
        own = p[start : start + len(kappa)]
        m_matrix[start : start + len(kappa)] = kappa @ p - own
        constant += float((kappa * (own @ p.T)).sum())
    constant -= float((p**2).sum())
    cumulative = p.cumsum(axis=1)
    cumulative[:, -1] = 1.0  # rounding must not leave a draw above the last class
    out = []
    chunk = max(1, _BLOCK // (n * k))
    for first in range(0, n_resamples, chunk):
        labels = _draw(cumulative, min(chunk, n_resamples - first), rng)
        onehot = (labels[:, :, None] == np.arange(k)).reshape(n, -1).astype(np.float64)
        same = np.full(labels.shape[1], -float(n))  # less the diagonal's [l_i = l_i]
        for start, kappa in _kernel_blocks(p, nu):
            block = (kappa @ onehot).reshape(len(kappa), labels.shape[1], k)
            own = labels[start : start + len(kappa), :, None]
            same += np.take_along_axis(block, own, axis=2).sum(axis=(0, 2))
        cross = np.take_along_axis(m_matrix, labels, axis=1).sum(axis=0)
        out.append((same - 2 * cross + constant) / (n * (n - 1)))
    return np.concatenate(out)


def skce_p_value(
    probs, y, estimator="linear", bandwidth="median", n_resamples=1000, seed=0
) -> float:
    r"""p-value of the hypothesis that the predictions are calibrated, from the SKCE
    (Widmann et al. 2019; module docstring).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    estimator : {"linear", "unbiased"}
        ``linear``: the asymptotic normal test of the linear estimator (no resampling);
        ``unbiased``: consistency resampling of the unbiased estimator.
    bandwidth : "median" or float
        The kernel's bandwidth nu, or the median heuristic.
    n_resamples : int
        Label sets drawn from the predictions (``unbiased`` only).
    seed : int
        Seed of ``numpy.random.default_rng`` (``unbiased`` only).

    Returns
    -------
    float
        In [0, 1]; small values reject calibration.
    """
    owner = "skce_p_value"
    check_int(n_resamples, "n_resamples", owner)
    p, y, nu = _checked(probs, y, owner, estimator, bandwidth, minimum=4)
    if estimator == "linear":
        terms = _linear_terms(p, y, nu)
        spread = float(terms.std(ddof=1))
        if spread == 0:
            return 1.0 if terms.mean() <= 0 else 0.0
        z = math.sqrt(len(terms)) * float(terms.mean()) / spread
        return 0.5 * math.erfc(z / math.sqrt(2))
    observed = _unbiased(p, y, nu)
    resampled = _resampled_unbiased(p, nu, n_resamples, np.random.default_rng(seed))
    return float((resampled >= observed - 1e-15).mean())
