"""Loss families and Ho's risk-vs-eps curves (4.4, 4.5): what a cell records on each fold."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.decision import c100_dangerous, empirical_risk, ham10000_treat, zero_one
from calbench.decision.family import between, curve_eps, curve_metric, prior_shift_family
from calbench.decision.shift import adapt_posteriors, long_tail_prior
from calbench.errors import CalbenchError
from calbench.runner.cell import run_cell
from calbench.runner.decision_task import decision_task
from calbench.runner.plan import plan_cell
from tests.runner.test_runner import config, plan


def _loss_and_shift(cfg):
    spec = plan_cell(cfg).spec
    return spec.loss, spec.shift


def _values(rows):
    return rows.set_index("metric")["value"]


def _curve(values):
    return {curve_eps(m): v for m, v in values.items() if curve_eps(m) is not None}


def test_family_configs_span_the_losses_of_ho_4_4():
    for name, n, ends in [
        ("dangerous_cost_family", 20, (c100_dangerous(20, 100), c100_dangerous(20, 1000))),
        ("ham10000_idk_family", 7, (ham10000_treat(7, 0.0), ham10000_treat(7, 9.0))),
    ]:
        task = decision_task(*_loss_and_shift(config(f"loss={name}")), None, n)
        np.testing.assert_allclose(task.family.at(0), ends[0])
        np.testing.assert_allclose(task.family.at(1), ends[1])
        np.testing.assert_allclose(task.loss, (ends[0] + ends[1]) / 2)  # eps = 0.5
    assert curve_eps(curve_metric(0.05)) == 0.05 and curve_eps("empirical_risk") is None


def test_a_family_cell_records_the_test_risk_at_every_eps_of_the_curve():
    cell = plan("method=ts", "loss=reject_cost_family", "dataset.n_test=3000")
    values = _values(run_cell(cell))
    curve = _curve(values)
    assert sorted(curve) == pytest.approx(np.linspace(0, 1, 21))
    # Reference: the same TS map, decisions under each reject cost taken by hand.
    data = cell.load_dataset()
    probs = make_calibrator("ts").fit(data.logits_cal, data.y_cal).predict_proba(data.logits_test)
    for eps in (0.0, 0.35, 1.0):
        matrix = np.hstack([zero_one(3), np.full((3, 1), eps)])
        expected = empirical_risk(probs, data.y_test, matrix)
        assert curve[eps] == pytest.approx(expected, abs=1e-12)
    assert values["empirical_risk"] == pytest.approx(curve[0.5], abs=1e-12)
    # A free reject: never worse than the 0/1 risk; at cost 1, rejecting never pays.
    assert curve[0.0] <= curve[1.0] <= 1 - values["accuracy"] + 1e-12


def test_direct_loss_is_trained_at_each_eps_of_the_curve_and_scored_there():
    cell = plan(
        "method=ts",
        "criterion=direct",
        "loss=reject_cost_family",
        "dataset.n_cal=1500",
        "dataset.n_test=1000",
    )
    curve = _curve(_values(run_cell(cell)))
    assert sorted(curve) == [0.0, 0.25, 0.5, 0.75, 1.0]
    data = cell.load_dataset()
    calibrator, grid = cell.calibrator(data, cell.task(None, 3), 0.25)
    matrix = np.hstack([zero_one(3), np.full((3, 1), 0.25)])
    for point in grid["criterion"]:  # the whole lambda x beta grid sees the loss at 0.25
        np.testing.assert_allclose(point["loss_matrix"], matrix)


def importance_weights(y, train_prior, test_prior) -> np.ndarray:
    """Eq. 3.37's weights p_test(y_i) / p_train(y_i), written here apart from the runner's."""
    return (np.asarray(test_prior) / np.asarray(train_prior))[np.asarray(y)]


def test_a_prior_shift_is_the_family_of_eqs_3_40_3_41():
    loss = zero_one(4)
    train = np.array([0.4, 0.3, 0.2, 0.1])
    target = np.array([0.1, 0.1, 0.3, 0.5])
    family = prior_shift_family(loss, train, target)
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=500)
    y = rng.integers(0, 4, 500)
    for eps in (0.0, 0.3, 1.0):
        test = (1 - eps) * train + eps * target
        # Bayes-corrected decisions under l, importance-weighted (eqs. 3.36, 3.37) ...
        adapted = adapt_posteriors(probs, train, test)
        weights = importance_weights(y, train, test)
        expected = empirical_risk(adapted, y, loss, weights=weights)
        # ... equal the decisions and mean cost under l_eps on the uncorrected posteriors.
        assert family.risks(probs, y, [eps])[0] == pytest.approx(expected, abs=1e-12)
    with pytest.raises(CalbenchError, match="same classes"):
        between(zero_one(3), zero_one(4))


def test_a_shifted_cell_fits_the_integral_loss_on_the_folds_prior_family():
    from calbench.criteria import get_criterion

    cell = plan(
        "method=ts", "criterion=integral", "shift=lt_stronger", "protocol=nested",
        "dataset.n_test=600", "protocol.outer_folds=3", "protocol.inner_folds=3",
    )  # fmt: skip
    data = cell.load_dataset()
    fold = next(iter(cell.folds(data)))
    task = cell.task(fold, 3)
    member = fold.members[0]
    train = np.bincount(member.y_fit, minlength=3) / len(member.y_fit)
    accuracy = [
        (member.logits_fit.argmax(1) == member.y_fit)[member.y_fit == c].mean() for c in range(3)
    ]
    target = long_tail_prior(accuracy, 1.5)
    np.testing.assert_allclose(task.priors[0], train)
    calibrator, _ = cell.calibrator(data, task)
    spec = calibrator.get_params()["criterion"]
    np.testing.assert_allclose(spec["l0"], zero_one(3))
    np.testing.assert_allclose(spec["l1"], (target / train - 1)[:, None] * zero_one(3))
    get_criterion(spec)  # a valid non-negative family
    values = _values(run_cell(cell))
    curve = _curve(values)
    # The scalar metrics at the shift's eps (1.0) are the curve's last point; per fold.
    per_fold = run_cell(cell).pivot(index="fold", columns="metric", values="value")
    np.testing.assert_allclose(per_fold[curve_metric(1.0)], per_fold["empirical_risk"], atol=1e-12)
    assert len(curve) == 21


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["loss=reject_cost_family", "shift=lt_k1"], "pick one of them"),
        (["criterion=integral"], "needs a loss family"),
        (["loss=reject_cost_family", "loss.curve.points=1"], "curve needs points"),
        (["loss=reject_cost_family", "loss.curve.points=19"], "not among the 19"),
        (["loss=reject_cost_family", "loss.eps=2"], "eps must lie in"),
    ],
)
def test_family_misconfigurations_name_the_fix(overrides, message):
    with pytest.raises(CalbenchError, match=message):
        run_cell(plan("method=ts", "dataset.n_test=300", *overrides))
