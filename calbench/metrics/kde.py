"""KDE-ECE: the binning-free top-label calibration error of Zhang et al. 2020 (Mix-n-Match),
as reported in Gupta et al. Table 7.

Two densities over the confidence c = max_k p_k are estimated with a triweight kernel
(standard deviation h = std(c | correct) (2n)^-0.2), reflected at 0 and 1: f1 over the
confidences of the correct predictions and f over all of them. The estimated accuracy at
confidence x is min(1, acc * f1(x) / f(x)) and

.. math:: \\mathrm{KDE\\text{-}ECE} = \\frac{\\int_0^1 |x - \\widehat{acc}(x)|\\, f(x)\\,dx}
          {\\int_0^1 f(x)\\,dx},

integrated by the trapezoid rule on Zhang's grid (2^14 points over [-0.6, 1.6]). The
densities are evaluated as Zhang's code does through KDEpy's FFTKDE: the data are linearly
binned onto the grid and convolved with the sampled kernel, here with numpy.

Where the confidences barely spread (their standard deviation below Zhang's floor of 1e-3,
as every uniform prediction's), or the kernel spans fewer than `_MIN_KERNEL_POINTS` grid
points, there is no density to estimate: Zhang's code then carries the integrand's last
value across the empty grid and returns values far outside [0, 1] (38.2 for 1,000 uniform
10-class rows, all correct; 1.80 for 20). There the estimate's limit as h -> 0 is computed
instead: the confidences fall into clusters whose kernels do not overlap, and each
contributes its share of rows times ``|mean confidence - accuracy|^order``.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import check_choice
from calbench.metrics._checks import probs_and_labels

_GRID = np.linspace(-0.6, 1.6, num=2**14)
#: A kernel sampled by fewer grid points than this is not resolved (module docstring).
_MIN_KERNEL_POINTS = 17
#: Zhang's floor on the confidences' spread; below it they are one point, not a density.
_MIN_SPREAD = 1e-3


def _reflect(d):
    """Points below 1/2 mirrored about 0, those above about 1 (Zhang's mirror_1d)."""
    return np.concatenate([-d[d < 0.5], d, 2.0 - d[d >= 0.5]])


def triweight_density(data, bandwidth, grid=_GRID):
    """Triweight KDE of ``data`` on the equally spaced ``grid``; ``bandwidth`` is the
    kernel's standard deviation (support +- 3 h), linear binning as KDEpy's FFTKDE."""
    step = grid[1] - grid[0]
    pos = (np.asarray(data, dtype=np.float64) - grid[0]) / step
    left = np.floor(pos).astype(np.int64)
    frac = pos - left
    counts = np.zeros(len(grid) + 1)
    inside = (left >= 0) & (left < len(grid))
    np.add.at(counts, left[inside], 1 - frac[inside])
    np.add.at(counts, left[inside] + 1, frac[inside])
    counts = counts[: len(grid)]
    radius = 3.0 * bandwidth  # the triweight's variance is 1/9 of its squared support
    half = int(np.floor(radius / step))
    u = np.arange(-half, half + 1) * step / radius
    kernel = (35.0 / 32.0) * (1 - u**2) ** 3 / radius
    return np.convolve(counts, kernel, mode="same") / len(data)


def kde_ece(probs, y, order: int = 1) -> float:
    """Zhang et al.'s (2020) KDE estimate of the top-label ECE (module docstring), as
    their Mix-n-Match code computes it (KDEpy's FFTKDE, triweight kernel, reflection).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Predicted probabilities, rows on the simplex.
    y : array-like of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    order : {1, 2}
        1: the ECE; 2: the integral of the squared gap (Zhang's ``order=2``).

    Returns
    -------
    float
        Lower is better; equal to Zhang et al.'s estimator written with KDEpy's
        binning to 1e-8 relative (tests/metrics/test_metrics.py).
    """
    check_choice(order, "order", "kde_ece", (1, 2))
    p, y = probs_and_labels(probs, y, "kde_ece")
    conf = p.max(axis=1) / p.sum(axis=1)
    correct = p.argmax(axis=1) == y
    n = len(y)
    right = conf[correct]
    # h from the correct predictions' spread; where that is 0 (none or identical), from all.
    spread = np.std(right) if len(right) > 1 and np.std(right) > 0 else np.std(conf)
    bandwidth = max(spread, _MIN_SPREAD) * (2 * n) ** -0.2
    grid = _GRID
    unresolved = 2 * 3.0 * bandwidth < (_MIN_KERNEL_POINTS - 1) * (grid[1] - grid[0])
    if spread < _MIN_SPREAD or unresolved:
        return _narrow_kernel_limit(conf, correct, 3.0 * bandwidth, order)
    outside = (grid <= 0.0) | (grid >= 1.0)
    dens_all = 2 * triweight_density(_reflect(conf), bandwidth)
    dens_all[outside] = 0.0
    dens_right = 2 * triweight_density(_reflect(right), bandwidth) if len(right) else 0 * grid
    dens_right[outside] = 0.0
    acc = correct.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        estimated = np.minimum(acc * dens_right / dens_all, 1.0)
    estimated = np.where(dens_all > 0, estimated, 1.0)  # f = 0 < f1: Zhang's min(inf, 1)
    integrand = np.abs(grid - estimated) ** order * dens_all
    # Where both densities vanish, Zhang's loop carries the last value forward.
    empty = np.maximum(dens_all, dens_right) <= 1e-6
    last = np.maximum.accumulate(np.where(empty, -1, np.arange(len(grid))))
    integrand = np.where(last >= 0, integrand[np.maximum(last, 0)], 0.0)
    unit = (grid >= 0.0) & (grid <= 1.0)
    return float(
        np.trapezoid(integrand[unit], grid[unit]) / np.trapezoid(dens_all[unit], grid[unit])
    )


def _narrow_kernel_limit(conf, correct, radius, order) -> float:
    """KDE-ECE as the bandwidth goes to 0: clusters of confidences whose kernels (support
    ``radius`` either side) overlap, each weighted by its rows."""
    order_of = np.argsort(conf, kind="stable")
    c, right = conf[order_of], correct[order_of].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, np.diff(c) > 2 * radius])
    sizes = np.diff(np.r_[starts, len(c)])
    mean_conf = np.add.reduceat(c, starts) / sizes
    accuracy = np.add.reduceat(right, starts) / sizes
    return float(np.sum(sizes / len(c) * np.abs(mean_conf - accuracy) ** order))
