"""Ho's Direct Loss and Integral Loss against their defining properties."""

import numpy as np
import pytest
import torch

from calbench.criteria import get_criterion
from calbench.criteria.decision_aware import direct_loss, integral_loss, integral_loss_01_reject
from calbench.decision import empirical_risk, zero_one_reject
from calbench.errors import CalbenchError
from calbench.simplex import softmax


def _t(x):
    return torch.as_tensor(x)


def _risk_integral(probs, y, l0, l1, n_eps=4001):
    """The empirical risk of the Bayes decisions integrated over eps by a fine midpoint rule."""
    eps = (np.arange(n_eps) + 0.5) / n_eps
    return np.mean([empirical_risk(probs, y, l0 + e * l1) for e in eps])


def _random_problem(seed, n=300, k=4):
    """Logits, labels and the generator that made them (for a loss matrix to follow)."""
    rng = np.random.default_rng(seed)
    return 2 * rng.normal(size=(n, k)), rng.integers(0, k, n), rng


@pytest.mark.parametrize("seed", range(5))
def test_direct_loss_bounds_the_empirical_risk_from_above_for_negative_lambda(seed):
    k, actions = 4, 3
    logits, y, rng = _random_problem(seed)
    loss = rng.normal(size=(k, actions)) * rng.uniform(0.1, 10)
    risk = empirical_risk(softmax(logits), y, loss)
    for reg_lambda in (-0.01, -0.5, -3.0, -50.0):
        value = float(direct_loss(_t(logits), _t(y), loss, reg_lambda))
        assert value >= risk - 1e-12
    # A positive lambda bounds it from below (Ho Theorem 1, eq. 3.11).
    assert float(direct_loss(_t(logits), _t(y), loss, 0.5)) <= risk + 1e-12


def test_integral_loss_closed_form_equals_the_integral_over_the_reject_cost(rng):
    n, k = 400, 5
    logits = 1.5 * rng.normal(size=(n, k))
    y = rng.integers(0, k, n)
    l0 = zero_one_reject(k, 0.0)
    l1 = zero_one_reject(k, 1.0) - l0
    expected = _risk_integral(softmax(logits), y, l0, l1)
    closed = float(integral_loss_01_reject(_t(logits), _t(y)))
    assert closed == pytest.approx(expected, abs=2e-4)
    general = float(integral_loss(_t(logits), _t(y), l0, l1))
    assert general == pytest.approx(closed, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_general_integral_loss_equals_the_integral_for_random_non_negative_losses(seed):
    k, actions = 4, 3
    logits, y, rng = _random_problem(seed)
    l0 = rng.uniform(0, 5, (k, actions))
    l1 = rng.uniform(0, 5, (k, actions))
    expected = _risk_integral(softmax(logits), y, l0, l1)
    assert float(integral_loss(_t(logits), _t(y), l0, l1)) == pytest.approx(expected, abs=5e-3)


def test_criteria_registry_builds_decision_criteria_and_checks_them(rng):
    logits = rng.normal(size=(50, 3))
    y = rng.integers(0, 3, 50)
    l0 = zero_one_reject(3, 0.0)
    crit = get_criterion({"name": "integral", "l0": l0.tolist(), "l1": (1 - l0).tolist()})
    value, grad = crit(logits, y)
    assert np.isfinite(value) and grad.shape == logits.shape
    with pytest.raises(CalbenchError, match="negative costs"):
        get_criterion({"name": "integral", "l0": (-l0).tolist(), "l1": l0.tolist()})
    with pytest.raises(CalbenchError, match="needs its options"):
        get_criterion("direct")
    smooth = get_criterion(
        {"name": "direct", "loss_matrix": l0.tolist(), "reg_lambda": -1.0, "beta": 20.0}
    )
    value, grad = smooth(logits, y)
    h, i, j = 1e-6, 3, 1  # autograd gradient against a finite difference
    bumped = logits.copy()
    bumped[i, j] += h
    assert grad[i, j] == pytest.approx((smooth(bumped, y)[0] - value) / h, rel=1e-3, abs=1e-7)


def test_a_cell_fits_ts_on_the_integral_loss_and_beats_nll_on_it(tmp_path):
    from calbench.calibrators import make_calibrator
    from calbench.runner.cell import run_cell
    from tests.conftest import overconfident_logits
    from tests.runner.test_runner import plan

    family = ["criterion=integral", "loss=reject_cost_family"]
    rows = run_cell(plan("method=ts", *family, "dataset.n_test=2000"))
    assert set(rows["criterion"]) == {"integral"} and np.isfinite(rows["value"]).all()
    z, y = overconfident_logits(np.random.default_rng(1), 3000, 5)
    planned = plan(*family)
    spec = planned.criterion_spec(5, planned.task(None, 5))
    np.testing.assert_array_equal(spec["l0"], zero_one_reject(5, 0.0))
    np.testing.assert_array_equal(np.add(spec["l0"], spec["l1"]), zero_one_reject(5, 1.0))
    fitted = make_calibrator("ts", criterion=spec).fit(z, y)
    plain = make_calibrator("ts").fit(z, y)
    crit = get_criterion(spec)
    assert crit(z / fitted.temperature_, y)[0] <= crit(z / plain.temperature_, y)[0] + 1e-9


def test_ece_criterion_equals_the_ece_metric_and_has_gradients(rng):
    from calbench.metrics import confidence_ece

    logits = 2 * rng.normal(size=(400, 4))
    y = rng.integers(0, 4, 400)
    value, grad = get_criterion({"name": "ece", "n_bins": 15})(logits, y)
    assert value == pytest.approx(confidence_ece(softmax(logits), y, n_bins=15), abs=1e-12)
    assert np.abs(grad).sum() > 0


def test_direct_loss_grid_is_searched_by_the_empirical_risk_and_stored_compactly():
    import json

    from calbench.metrics import log_loss
    from calbench.runner.cell import run_cell
    from calbench.runner.selection import select_and_fit
    from tests.runner.test_runner import plan

    cell = plan("method=ts", "criterion=direct", "loss=zero_one_reject", "dataset.n_test=1000")
    data = cell.load_dataset()
    calibrator, grid = cell.calibrator(data, cell.task(None, data.n_classes))
    assert len(grid["criterion"]) == 6  # 3 lambdas x 2 betas, each a full criterion spec
    assert all("loss_matrix" in point for point in grid["criterion"])
    rows = run_cell(cell)
    chosen = json.loads(rows["params"].iat[0])["criterion"]
    assert set(chosen) == {"name", "reg_lambda", "beta"}  # no loss matrix in the store
    # The score hook: rating by minus the log-loss picks the other end of a grid.
    z, y = data.logits_cal, data.y_cal
    ts_grid = {"criterion": ["nll", "mse"]}
    best, _ = select_and_fit(calibrator, ts_grid, z, y, inner_folds=3)
    worst, _ = select_and_fit(
        calibrator, ts_grid, z, y, inner_folds=3, score=lambda p, t: -log_loss(p, t)
    )
    assert best.criterion != worst.criterion
