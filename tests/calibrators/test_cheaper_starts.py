"""Paths that make the scaling maps' fits cheaper reach the minimum the plain path
reaches: vector scaling's start from one common scale."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.calibrators.scaling.temperature import TemperatureScaling, scale_start
from calbench.calibrators.solvers.newton_vector import newton_vector


def test_vector_scaling_from_the_common_scale_reaches_the_identity_start_s_minimum(rng):
    """Beyond 36 classes VS starts Newton's method from a few Newton steps on one common
    scale (`scale_start`, near temperature scaling's 1 / T): fewer steps, the same map as
    from the identity to 1e-8."""
    n, k = 3000, 50
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 3
    z[np.arange(n), y] += 4.0
    z *= 2.5  # over-confident: temperature about 2.5
    beta = scale_start(z, y, steps=8)
    assert beta == pytest.approx(1 / TemperatureScaling().fit(z, y).temperature_, rel=1e-6)
    model = make_calibrator("vs").fit(z, y)
    w, b, steps, value = newton_vector(z, y, np.ones(k), np.zeros(k))
    assert model.n_iter_ < steps
    assert model.loss_ == pytest.approx(value, abs=1e-13)
    np.testing.assert_allclose(model.coef_, w, rtol=0, atol=1e-8)
    np.testing.assert_allclose(model.intercept_ - model.intercept_.mean(), b - b.mean(), atol=1e-8)


def test_the_common_scale_on_row_chunks_is_the_whole_array_s(rng, monkeypatch):
    """Past `LEAN_ENTRIES` `scale_start` runs on row chunks (no (n, k) array beside the
    features): the same scale, bit for bit."""
    from calbench.calibrators.scaling import temperature

    n, k = 1000, 40
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 3
    z[np.arange(n), y] += 4.0
    whole = scale_start(z, y)
    monkeypatch.setattr(temperature, "LEAN_ENTRIES", 7 * k)  # chunks of 7 rows
    assert scale_start(z, y) == whole
    assert whole == pytest.approx(1 / TemperatureScaling().fit(z, y).temperature_, rel=0.05)


def test_svs_from_its_features_exponential_is_the_evaluated_start_s_fit(rng, monkeypatch):
    """SVS beyond 36 classes takes its Newton start from ``exp(x)`` (its features are
    log-probabilities) instead of evaluating the softmax there: the same start to rounding,
    one evaluation fewer, the same fit."""
    from calbench.calibrators.solvers import newton_vector as nv

    n, k = 2000, 60
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)) * 3
    z[np.arange(n), y] += 4.0
    x = make_calibrator("svs").fit(z, y)._fitting_features(z)
    ones, zeros = np.ones(k), np.zeros(k)
    value, probs = nv.log_probability_start(x, y)
    evaluated_value, evaluated_probs = nv._vector_objective(ones, zeros, x, y, 0.0, 1.0, 0.0)
    assert value == pytest.approx(evaluated_value, rel=1e-14)
    np.testing.assert_allclose(probs, evaluated_probs, rtol=1e-12, atol=1e-300)

    calls = []
    objective = nv._vector_objective
    monkeypatch.setattr(nv, "_vector_objective", lambda *a: calls.append(1) or objective(*a))
    model = make_calibrator("svs").fit(z, y)
    with_start = len(calls)
    lam = model.penalties_
    calls.clear()
    evaluated = newton_vector(x, y, ones, zeros, lam["diagonal"], 1.0, lam["intercept"])
    assert with_start == len(calls) - 1
    np.testing.assert_allclose(model.coef_, evaluated[0], rtol=0, atol=1e-12)
    b = evaluated[1]
    np.testing.assert_allclose(model.intercept_ - model.intercept_.mean(), b - b.mean(), atol=1e-12)
