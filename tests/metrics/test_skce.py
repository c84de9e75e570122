"""Widmann et al.'s SKCE against its estimators written out as loops, and its calibration
tests under the null (labels drawn from the predictions) and under miscalibration."""

import itertools
import math

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.metrics import kernel_calibration as skce_module
from calbench.metrics import skce, skce_p_value


def _h(pi, yi, pj, yj, nu):
    """Widmann et al.'s h for two samples, from its definition."""
    k = len(pi)
    kappa = math.exp(-math.sqrt(sum((a - b) ** 2 for a, b in zip(pi, pj, strict=True))) / nu)
    ei, ej = np.eye(k)[yi], np.eye(k)[yj]
    return kappa * sum((ei[c] - pi[c]) * (ej[c] - pj[c]) for c in range(k))


def _sample(rng, n, k, sharpen=1.0):
    """Predictions p and labels drawn from p ** sharpen renormalised (1: calibrated)."""
    p = rng.dirichlet(np.ones(k), n)
    q = p**sharpen / (p**sharpen).sum(axis=1, keepdims=True)
    y = (q.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return p, y


@pytest.mark.parametrize("n", [30, 31])
def test_estimators_equal_the_double_loop(rng, n):
    p, y = _sample(rng, n, 4, sharpen=3.0)
    pairs = list(itertools.combinations(range(n), 2))
    median = float(np.median([math.dist(p[i], p[j]) for i, j in pairs]))
    for nu, bandwidth in ((0.3, 0.3), (median, "median")):
        unbiased = sum(_h(p[i], y[i], p[j], y[j], nu) for i, j in pairs) / len(pairs)
        linear = np.mean([_h(p[i], y[i], p[i + 1], y[i + 1], nu) for i in range(0, n - 1, 2)])
        assert skce(p, y, bandwidth=bandwidth) == pytest.approx(unbiased, rel=1e-10, abs=1e-14)
        assert skce(p, y, estimator="linear", bandwidth=bandwidth) == pytest.approx(
            linear, rel=1e-10, abs=1e-14
        )


def test_the_blocks_do_not_change_the_unbiased_estimate(rng, monkeypatch):
    p, y = _sample(rng, 1200, 5, sharpen=2.0)
    whole = skce(p, y)
    monkeypatch.setattr(skce_module, "_BLOCK", 5000)  # blocks of 4 rows
    assert skce(p, y) == pytest.approx(whole, rel=1e-12)


def test_resampled_statistics_are_the_unbiased_estimate_of_each_draw(rng):
    p, _ = _sample(rng, 40, 3)
    nu = skce_module.bandwidth_of(p, "median", "test")
    resampled = skce_module._resampled_unbiased(p, nu, 7, np.random.default_rng(5))
    cumulative = p.cumsum(axis=1)
    cumulative[:, -1] = 1.0
    labels = skce_module._draw(cumulative, 7, np.random.default_rng(5))
    direct = [skce_module._unbiased(p, labels[:, s], nu) for s in range(7)]
    np.testing.assert_allclose(resampled, direct, rtol=1e-10, atol=1e-14)


def test_under_calibration_p_values_are_uniform_and_the_skce_centred():
    """200 seeds of 60 samples, labels drawn from the predictions: the share of p < 0.05
    of either test inside the 200-draw binomial band [2, 20] (mean 10, sd 3.1), and the
    unbiased SKCE's mean within 3 standard errors of 0."""
    from threadpoolctl import threadpool_limits

    linear, resampled, values = [], [], []
    # 60 x 60 products: threads of a loaded BLAS cost 20 times the work itself
    with threadpool_limits(limits=1, user_api="blas"):
        for seed in range(200):
            p, y = _sample(np.random.default_rng(seed), 60, 3)
            linear.append(skce_p_value(p, y))
            resampled.append(skce_p_value(p, y, estimator="unbiased", n_resamples=100, seed=seed))
            values.append(skce(p, y))
    for p_values in (np.array(linear), np.array(resampled)):
        assert 2 <= (p_values < 0.05).sum() <= 20
        assert 70 <= (p_values < 0.5).sum() <= 130  # mean 100, sd 7.1
    values = np.array(values)
    assert abs(values.mean()) < 3 * values.std(ddof=1) / math.sqrt(len(values))


def test_miscalibrated_predictions_are_rejected(rng):
    """Labels drawn from the predictions sharpened (p ** 5: the predictions are
    under-confident). The linear test has little power (it uses n/2 of the pairs), so it
    gets 20,000 samples (linear time) where the unbiased one gets 400."""
    p, y = _sample(rng, 400, 4, sharpen=5.0)
    assert skce(p, y) > 0.005
    assert skce_p_value(p, y, estimator="unbiased", n_resamples=100) == 0.0
    p, y = _sample(rng, 20_000, 4, sharpen=5.0)
    assert skce(p, y, estimator="linear") > 0.005
    assert skce_p_value(p, y) < 1e-4


def test_bad_options_are_refused(rng):
    p, y = _sample(rng, 20, 3)
    with pytest.raises(CalbenchError, match="'bandwidth' parameter of skce"):
        skce(p, y, bandwidth=-1.0)
    with pytest.raises(CalbenchError, match="'estimator' parameter of skce"):
        skce(p, y, estimator="quadratic")
    with pytest.raises(CalbenchError, match="at least 4 samples"):
        skce_p_value(p[:3], y[:3])
