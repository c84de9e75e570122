"""Mix-n-Match calibrators (ETS, IRM, IROvA-TS) and the MSE criterion against references."""

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators import make_calibrator
from calbench.calibrators.scaling.ensemble import simplex_least_squares
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


def _simplex_grid(step=0.01):
    ticks = np.linspace(0, 1, round(1 / step) + 1)
    return np.array([(a, b, 1 - a - b) for a in ticks for b in ticks if a + b <= 1 + 1e-12])


@pytest.mark.parametrize("case", range(12))
def test_simplex_least_squares_is_the_minimum_on_the_simplex(case):
    """Against SLSQP started from every vertex and a fine grid: random PSD problems whose
    minimum lies inside, on an edge or at a vertex, and a singular one (two equal
    components, as at t = 1)."""
    rng = np.random.default_rng(case)
    parts = rng.random((3, 40))
    if case % 4 == 3:
        parts[1] = parts[0]
    target = parts.T @ rng.normal(size=3) * (1 + case) + rng.normal(size=40) * 0.1
    gram, linear = parts @ parts.T / 40, parts @ target / 40

    def value(w):
        return float(w @ gram @ w - 2 * linear @ w)

    w = simplex_least_squares(gram, linear)
    assert w.min() >= 0 and w.sum() == pytest.approx(1, abs=1e-15)
    references = [
        minimize(
            value,
            start,
            method="SLSQP",
            bounds=[(0, 1)] * 3,
            tol=1e-14,
            constraints={"type": "eq", "fun": lambda v: v.sum() - 1},
        ).x
        for start in np.eye(3)
    ]
    best = min(value(np.clip(r, 0, None) / np.clip(r, 0, None).sum()) for r in references)
    assert value(w) <= best + 1e-13
    assert value(w) <= min(value(g) for g in _simplex_grid()) + 1e-13


def test_ets_on_nll_weights_minimise_the_log_loss(rng):
    """criterion nll: t by TS on the log-loss and w minimising the mixture's log-loss (Zhang
    et al.'s ``ll_w``), not its squared error."""
    z, y = overconfident_logits(rng, 1500, 5)
    ets = make_calibrator("ets", criterion="nll").fit(z, y)
    ts = make_calibrator("ts").fit(z, y)
    assert ets.temperature_ == pytest.approx(ts.temperature_, rel=1e-6)
    parts = np.stack([softmax(z / ets.temperature_), softmax(z), np.full(z.shape, 0.2)])
    at_label = parts[:, np.arange(len(y)), y]

    def log_loss(w):
        return -np.log(w @ at_label).mean()

    assert log_loss(ets.weights_) <= min(log_loss(g) for g in _simplex_grid()) + 1e-9
    mse_weights = make_calibrator("ets").fit(z, y).weights_
    assert log_loss(ets.weights_) < log_loss(mse_weights)


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
