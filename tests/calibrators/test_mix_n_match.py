"""Mix-n-Match calibrators (ETS, IRM, IROvA-TS) and the MSE criterion against references."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators import make_calibrator
from calbench.criteria import mse
from calbench.simplex import softmax
from tests.conftest import overconfident_logits


def test_mse_criterion_gradient_matches_finite_differences(rng):
    z, y = rng.normal(size=(9, 4)) * 3, rng.integers(0, 4, 9)
    value, grad = mse(z, y)
    assert value == pytest.approx(((softmax(z) - np.eye(4)[y]) ** 2).mean())
    eps, numeric = 1e-6, np.zeros_like(z)
    for idx in np.ndindex(z.shape):
        step = np.zeros_like(z)
        step[idx] = eps
        numeric[idx] = (mse(z + step, y)[0] - mse(z - step, y)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, atol=1e-9)


def test_ets_temperature_and_weights_minimise_the_mse(rng):
    z, y = overconfident_logits(rng, 1500, 5)
    ets = make_calibrator("ets").fit(z, y)
    one_hot = np.eye(5)[y]
    ref_t = minimize_scalar(
        lambda t: ((softmax(z / t) - one_hot) ** 2).mean(),
        bounds=(0.05, 20),
        method="bounded",
        options={"xatol": 1e-9},
    ).x
    assert ets.temperature_ == pytest.approx(ref_t, rel=1e-3)
    assert ets.weights_.sum() == pytest.approx(1) and (ets.weights_ >= 0).all()
    parts = [softmax(z / ets.temperature_), softmax(z), np.full(z.shape, 0.2)]

    def error(w):
        return ((w[0] * parts[0] + w[1] * parts[1] + w[2] * parts[2] - one_hot) ** 2).mean()

    grid = [
        (a, b, 1 - a - b)
        for a in np.linspace(0, 1, 101)
        for b in np.linspace(0, 1, 101)
        if a + b <= 1 + 1e-12
    ]
    assert error(ets.weights_) <= min(error(np.array(w)) for w in grid) + 1e-12


def test_irm_is_one_isotonic_map_over_all_classes(rng):
    z, y = overconfident_logits(rng, 800, 4)
    p = softmax(z)
    ref = IsotonicRegression(out_of_bounds="clip").fit(p.ravel(), np.eye(4)[y].ravel())
    test = softmax(rng.normal(size=(200, 4)) * 3)
    expected = ref.predict(test.ravel()).reshape(test.shape) + 1e-9 * test
    expected /= expected.sum(axis=1, keepdims=True)
    got = make_calibrator("irm").fit(z, y).predict_proba(np.log(test))
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_irova_tie_break_keeps_the_order_within_flat_steps(rng):
    z, y = overconfident_logits(rng, 300, 3)
    plain = make_calibrator("isotonic").fit(z, y)
    broken = make_calibrator("isotonic", tie_break=1e-9).fit(z, y)
    test = rng.normal(size=(500, 3)) * 4
    tied = (
        np.sort(plain.predict_proba(test), axis=1)[:, -1]
        == np.sort(plain.predict_proba(test), axis=1)[:, -2]
    )
    p = broken.predict_proba(test)
    # where isotonic values tie, the tie-break hands the top to the higher original score
    assert (p[tied].argmax(axis=1) == softmax(test)[tied].argmax(axis=1)).all()
    np.testing.assert_allclose(p, plain.predict_proba(test), atol=1e-8)


def test_fixed_criterion_survives_the_runner():
    from hydra import compose, initialize_config_module

    from calbench.data import load_dataset
    from calbench.runner.plan import plan_cell

    with initialize_config_module("calbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=["method=irova_ts", "criterion=nll"])
    ds = load_dataset("synthetic_dirichlet", n_cal=100, n_test=10)
    plan = plan_cell(cfg)
    calibrator, _ = plan.calibrator(ds, plan.task(None, ds.n_classes))
    assert calibrator.get_params()["first__criterion"] == "mse"
