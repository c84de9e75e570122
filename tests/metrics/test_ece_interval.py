"""Sun et al.'s (2024) debiased L2-ECE and its interval, against the authors' per-bin
algorithm written out as loops, and its coverage where the true L2-ECE is known."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.metrics import l2_ece_interval, l2_ece_squared


def _loop_reference(probs, y, n_bins, topk):
    """The authors' T_mn_estimator (github.com/sylydya/CI-ECE, experiments/estimator.py)
    as loops over the grid's cells: T and the variance of sqrt(n) T."""
    n, k = probs.shape
    order = np.argsort(-probs, axis=1, kind="stable")[:, :topk]
    z = np.take_along_axis(probs, order, axis=1)
    u = (order == y[:, None]).astype(float) - z
    cells = np.minimum(np.floor(z * n_bins).astype(int), n_bins - 1)
    estimate, first, second = 0.0, 0.0, 0.0
    for cell in {tuple(c) for c in cells}:
        members = np.all(cells == np.array(cell), axis=1)
        ub, nb = u[members], members.sum()
        mean = ub.mean(axis=0)
        value = nb * (mean @ mean) - (ub**2).sum(axis=1).mean()
        if nb > 1:
            value *= nb / (nb - 1)
        estimate += value / n
        moment = ub.T @ ub / nb
        first += (4 * mean @ moment @ mean - 3 * (mean @ mean) ** 2) * nb / n
        second += (mean @ mean) * nb / n
    return estimate, first - second**2


@pytest.mark.parametrize(("k", "topk", "n_bins"), [(2, 1, 15), (4, 1, 10), (4, 2, 6), (3, 3, 4)])
def test_estimate_and_variance_equal_the_authors_loops(rng, k, topk, n_bins):
    probs = rng.dirichlet(np.ones(k) * 0.8, 500)
    sharp = probs**2 / (probs**2).sum(axis=1, keepdims=True)
    y = (sharp.cumsum(axis=1) > rng.random((500, 1))).argmax(axis=1)
    estimate, variance = _loop_reference(probs, y, n_bins, topk)
    out = l2_ece_interval(probs, y, n_bins=n_bins, topk=topk)
    assert out.estimate == pytest.approx(estimate, rel=1e-10, abs=1e-14)
    assert out.sigma**2 == pytest.approx(variance, rel=1e-10, abs=1e-14)
    assert l2_ece_squared(probs, y, n_bins=n_bins, topk=topk) == out.estimate


def test_the_interval_follows_the_authors_three_cases():
    """T+ far from 0: T+ -/+ z_{a/2} s; near: T+ / 2 below; at 0: max(T+ - z_a s, 0)."""
    rng = np.random.default_rng(3)
    confidence = rng.uniform(0.5, 1.0, 4000)
    probs = np.column_stack([confidence, 1 - confidence])
    y = (rng.random(4000) >= confidence - 0.1).astype(int)  # 10 points over-confident
    out = l2_ece_interval(probs, y, alpha=0.1)
    s = out.sigma / math.sqrt(4000)
    z = NormalDist().inv_cdf(0.95)
    assert out.estimate > 2 * z * s
    assert (out.lower, out.upper) == pytest.approx((out.estimate - z * s, out.estimate + z * s))


# Confidence uniform on [0.5, 1); the accuracy below it by a gap constant within each of
# the 15 equal-width bins, so that the binned target is the true squared L2-ECE.
_GAPS = {b: 0.02 * (b - 6) for b in range(7, 15)}


def _true_squared_ece():
    share = {b: (min((b + 1) / 15, 1.0) - max(b / 15, 0.5)) / 0.5 for b in _GAPS}
    return sum(share[b] * _GAPS[b] ** 2 for b in _GAPS)


def test_the_interval_covers_the_known_squared_ece():
    """1000 seeds of 3000 samples, 90% intervals: the share covering the true squared
    L2-ECE, 0.0004 (1/15 + 2/15 (4 + 9 + ... + 64)) = 0.010853, within the 1000-draw
    binomial band [0.87, 0.93] (sd 0.0095)."""
    gaps = np.zeros(15)
    gaps[list(_GAPS)] = list(_GAPS.values())
    truth = _true_squared_ece()
    covered = []
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        confidence = rng.uniform(0.5, 1.0, 3000)
        accuracy = confidence - gaps[np.minimum((confidence * 15).astype(int), 14)]
        y = (rng.random(3000) >= accuracy).astype(int)  # class 0 with prob. accuracy
        out = l2_ece_interval(np.column_stack([confidence, 1 - confidence]), y, alpha=0.1)
        covered.append(out.lower <= truth <= out.upper)
    assert truth == pytest.approx(0.0004 * (1 / 15 + 2 / 15 * 203), rel=1e-12)
    assert 0.87 <= np.mean(covered) <= 0.93


def test_the_estimate_is_centred_at_zero_when_calibrated():
    values = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        probs = rng.dirichlet(np.ones(4), 500)
        y = (probs.cumsum(axis=1) > rng.random((500, 1))).argmax(axis=1)
        values.append(l2_ece_squared(probs, y, topk=2, n_bins=5))
    values = np.array(values)
    assert abs(values.mean()) < 3 * values.std(ddof=1) / math.sqrt(len(values))


def test_bad_options_are_refused(rng):
    probs = rng.dirichlet(np.ones(3), 50)
    y = rng.integers(0, 3, 50)
    with pytest.raises(CalbenchError, match="'alpha' parameter of l2_ece_interval"):
        l2_ece_interval(probs, y, alpha=1.5)
    with pytest.raises(CalbenchError, match="topk=4 is more than the 3 classes"):
        l2_ece_interval(probs, y, topk=4)
    with pytest.raises(CalbenchError, match="'value' parameter of l2_ece_squared"):
        l2_ece_squared(probs, y, value="middle")
