r"""Smooth ECE (Błasiok and Nakkiran 2024, "Smooth ECE: principled reliability diagrams via
kernel smoothing"), as their package ``relplot`` computes it.

The residuals :math:`r_i = f_i - y_i` of the confidences :math:`f_i = \max_j p_{ij}`
(:math:`y_i = 1[\arg\max_j p_{ij} = y_i]`) are smoothed with a Gaussian kernel of width
:math:`\sigma`, reflected at 0 and 1, and weighted by the kernel density of the
confidences:

.. math::

    \mathrm{smECE}_\sigma = \frac{\int_0^1 |\hat r_\sigma(t)|\, \hat\delta_\sigma(t)\, dt}
        {\int_0^1 \hat\delta_\sigma(t)\, dt},
    \qquad
    \hat r_\sigma(t) = \frac{\sum_i K_\sigma(t, f_i)\, r_i}{\hat\delta_\sigma(t)},
    \quad \hat\delta_\sigma(t) = \sum_i K_\sigma(t, f_i).

The automatic bandwidth is the fixed point :math:`\sigma^* = \mathrm{smECE}_{\sigma^*}`
(their Theorem: the measure is then a consistent calibration measure), found by bisection.
As ``relplot`` 1.0 does, the sums are taken by linearly binning the scores onto a grid of
``max(2000, 20 / sigma) // 2 + 1`` points, convolving with the kernel sampled there, and
interpolating at ``max(200, 10 / sigma)`` equally spaced evaluation points; the density
gets ``1e-4`` added before dividing; the bisection runs 10 halvings of [0, 1] and returns
the upper end of the last bracket.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError
from calbench.metrics._checks import probs_and_labels
from calbench.metrics.binned import top_label

# relplot's constants (metrics.py, kernels.py).
_DENSITY_FLOOR = 1e-4
_MIN_MESH = 200
_HALVINGS = 10
_SMALLEST_BANDWIDTH = 1e-3


def _kernel_sums(scores, values, sigma, at):
    """``sum_i K(t, f_i) v_i`` at the points ``at`` for each array of ``values``, K the
    reflected Gaussian of ``sigma`` (the scores' binning and the kernel made once)."""
    n_grid = max(2000, round(20 / sigma)) // 2 + 1
    position = scores * (n_grid - 1)
    left = position.astype(np.int64).clip(0, n_grid - 2)
    frac = position - left
    grid = np.linspace(0.0, 1.0, n_grid)
    kernel = np.exp(-((grid - 0.5) ** 2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
    index = (at * (n_grid - 1)).astype(np.int64).clip(0, n_grid - 2)
    weight = (at - index / (n_grid - 1)) * (n_grid - 1)
    start = n_grid // 2
    sums = []
    for v in values:
        binned = np.bincount(left, weights=(1 - frac) * v, minlength=n_grid)
        binned += np.bincount(left + 1, weights=frac * v, minlength=n_grid)
        mirrored = np.concatenate([binned[::-1][:-1], binned, binned[::-1][1:]])
        smoothed = np.convolve(mirrored, kernel, "valid")[start : start + n_grid]
        sums.append(smoothed[index] * (1 - weight) + smoothed[index + 1] * weight)
    return sums


def smooth_ece_at(scores, outcomes, sigma: float) -> float:
    """smECE of (score, outcome) pairs at the fixed bandwidth ``sigma``."""
    at = np.linspace(0.0, 1.0, max(round(10 / sigma), _MIN_MESH))
    counts, residuals = _kernel_sums(scores, [np.ones_like(scores), scores - outcomes], sigma, at)
    density = counts + _DENSITY_FLOOR
    residual = residuals / density
    return float(np.sum(np.abs(residual) * density) / np.sum(density))


def smooth_ece_bandwidth(scores, outcomes) -> float:
    """The automatic bandwidth: where ``sigma`` meets ``smECE_sigma`` (bisection)."""

    def too_wide_to_pass(sigma):
        return sigma < _SMALLEST_BANDWIDTH or sigma < smooth_ece_at(scores, outcomes, sigma)

    if too_wide_to_pass(1.0):
        return 1.0
    upper, lower = 1.0, 0.0
    for _ in range(_HALVINGS):
        middle = (upper + lower) / 2
        if too_wide_to_pass(middle):
            lower = middle
        else:
            upper = middle
    return upper


def smooth_ece(probs, y, bandwidth=None) -> float:
    r"""Smooth ECE of the top-label confidence (module docstring; Błasiok and Nakkiran 2024).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    bandwidth : float or None
        The kernel's ``sigma``; None (default) chooses it as the fixed point
        ``sigma = smECE_sigma``, as ``relplot.smECE``.

    Returns
    -------
    float
        In [0, 1]; lower is better. Equal to ``relplot.smECE`` on the confidences and
        correctness indicators (tests/metrics/test_metrics.py).
    """
    p, y = probs_and_labels(probs, y, "smooth_ece")
    scores, outcomes = top_label(p, y)
    sigma = smooth_ece_bandwidth(scores, outcomes) if bandwidth is None else _sigma(bandwidth)
    return smooth_ece_at(scores, outcomes, sigma)


def _sigma(bandwidth) -> float:
    """A given bandwidth, a finite number above 0 (0 divided by zero; -0.1 gave a number)."""
    sigma = float(bandwidth)
    if not np.isfinite(sigma) or sigma <= 0:
        raise CalbenchError(
            f"smooth_ece: bandwidth must be a finite number above 0 (or None, to choose it); "
            f"got {bandwidth!r}."
        )
    return sigma


def smoothed_reliability(probs, y, bandwidth=None, points: int = 200) -> dict:
    """Błasiok and Nakkiran's smoothed reliability diagram of the top-label confidence:
    the kernel-smoothed accuracy ``mu(t) = sum_i K(t, f_i) y_i / (sum_i K(t, f_i) + 1e-4)``
    at ``points`` equally spaced t, with the same kernel, bandwidth and floor as
    `smooth_ece` (relplot's ``prepare_rel_diagram`` line, without its bootstrap band).

    Returns a dict: ``mesh`` (t), ``accuracy`` (mu), ``density`` (the confidences' kernel
    density, integrating to about 1, not corrected at the boundaries), ``sigma`` and
    ``smooth_ece``.
    """
    p, y = probs_and_labels(probs, y, "smoothed_reliability")
    scores, outcomes = top_label(p, y)
    sigma = smooth_ece_bandwidth(scores, outcomes) if bandwidth is None else _sigma(bandwidth)
    mesh = np.linspace(0.0, 1.0, points)
    counts, hits = _kernel_sums(scores, [np.ones_like(scores), outcomes], sigma, mesh)
    return {
        "mesh": mesh,
        "accuracy": hits / (counts + _DENSITY_FLOOR),
        "density": counts / len(scores),
        "sigma": sigma,
        "smooth_ece": smooth_ece_at(scores, outcomes, sigma),
    }
