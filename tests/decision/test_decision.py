"""Loss matrices, Bayes decisions and risks against the papers' worked examples."""

import numpy as np
import pytest

from calbench.decision import (
    bayes_decisions,
    c100_dangerous,
    empirical_risk,
    fungi_buy,
    ham10000_treat,
    make_loss,
    model_risk,
    true_risk,
    zero_one,
)
from calbench.errors import CalbenchError
from calbench.metrics import risk_gap


def test_valk_fig6_example_opts_for_treatment():
    # Valk 2.6: classes 1-4 x (treatment, no treatment), p = (0.60, 0.25, 0.05, 0.10).
    loss = np.array([[3.3, 0.0], [1.0, 8.0], [2.0, 10.0], [3.0, 7.0]])
    p = np.array([[0.60, 0.25, 0.05, 0.10]])
    np.testing.assert_allclose(p @ loss, [[2.63, 3.2]])
    assert bayes_decisions(p, loss)[0] == 0  # treatment
    assert model_risk(p, loss) == pytest.approx(2.63)


def test_ho_counter_example_decision_calibrated_yet_true_risk_improvable():
    # Ho 3.2: two inputs, two classes, 0/1 loss.
    p_hat = np.array([[0.4, 0.6], [0.6, 0.4]])
    p_true = np.array([[0.6, 0.4], [0.8, 0.2]])
    loss = zero_one(2)
    assert model_risk(p_hat, loss) == pytest.approx(0.4)
    assert true_risk(p_hat, p_true, loss) == pytest.approx(0.4)  # decision calibrated
    assert true_risk(p_true, p_true, loss) == pytest.approx(0.3)  # yet 0.3 is reachable


def test_ho_loss_matrices_and_their_checks():
    fungi = fungi_buy(6)
    assert fungi.shape == (6, 2) and fungi[0, 0] == 10000 and fungi[5, 1] == 20
    ham = ham10000_treat(7)
    np.testing.assert_allclose(ham[:, 0], [11, 11, 0, 0, 0, 9.5, 0])
    np.testing.assert_allclose(ham10000_treat(7, idk_cost=3.0)[:, 2], 3.0)
    danger = c100_dangerous(20, cost=500)
    assert danger[18, 0] == 500 and danger[19, 18] == 500 and danger[18, 18] == 0
    assert danger[0, 1] == 1 and danger[17, 0] == 1
    with pytest.raises(CalbenchError, match="6 classes.*has 10.*conf/loss/fungi_buy.yaml"):
        make_loss("fungi_buy", 10)
    with pytest.raises(CalbenchError, match="not among the 5 classes"):
        make_loss("c100_dangerous", 5)
    with pytest.raises(CalbenchError, match="Unknown loss"):
        make_loss("nope", 3)


def test_empirical_risk_sum_and_mean_and_risk_gap(rng):
    p = rng.dirichlet(np.ones(6), 500)
    y = rng.integers(0, 6, 500)
    loss = fungi_buy()
    decisions = (p @ loss).argmin(axis=1)
    costs = loss[y, decisions]
    assert empirical_risk(p, y, loss, reduction="sum") == pytest.approx(costs.sum())
    assert empirical_risk(p, y, loss) == pytest.approx(costs.mean())
    expected = abs((p @ loss).min(axis=1).mean() - costs.mean())
    assert risk_gap(p, y, loss_matrix=loss) == pytest.approx(expected)


def test_importance_weighted_risk_equals_the_risk_after_resampling(rng):
    # A prior shift reweights each sample by new_prior[y] / old_prior[y] (Ho eq. 3.37).
    n, k = 200_000, 4
    y = rng.choice(k, n, p=[0.4, 0.3, 0.2, 0.1])
    p = rng.dirichlet(np.ones(k), n)
    p[np.arange(n), y] += 1.0  # informative predictions
    p /= p.sum(axis=1, keepdims=True)
    loss = zero_one(k) * np.array([1.0, 2.0, 5.0, 10.0])[:, None]
    old = np.bincount(y, minlength=k) / n
    new = np.array([0.1, 0.2, 0.3, 0.4])
    weighted = empirical_risk(p, y, loss, weights=(new / old)[y])
    keep = rng.random(n) < (new / old / (new / old).max())[y]  # rejection resampling
    resampled = empirical_risk(p[keep], y[keep], loss)
    assert weighted == pytest.approx(resampled, rel=0.02)


def test_long_tailed_priors_of_ho_4_5():
    from calbench.decision.shift import long_tail_prior, power_law_prior

    assert power_law_prior(20, 1.0)[0] == pytest.approx(1 / sum(1 / r for r in range(1, 21)))
    assert power_law_prior(20, 1.0)[0] == pytest.approx(0.28, abs=0.005)  # "28%"
    assert power_law_prior(20, 1.5)[0] == pytest.approx(0.46, abs=0.005)  # "46%"
    prior = long_tail_prior([0.9, 0.2, 0.6], 1.0)
    np.testing.assert_allclose(prior, np.array([1 / 3, 1, 1 / 2]) / (11 / 6))


def test_bayes_correction_and_the_checks_of_priors():
    from calbench.decision.shift import adapt_posteriors, check_prior, mixed_prior

    p = np.array([[0.5, 0.3, 0.2]])
    train, test = np.array([0.5, 0.25, 0.25]), np.array([0.2, 0.2, 0.6])
    expected = p * test / train
    np.testing.assert_allclose(adapt_posteriors(p, train, test), expected / expected.sum())
    np.testing.assert_allclose(mixed_prior(train, test, 0.25), 0.75 * train + 0.25 * test)
    with pytest.raises(CalbenchError, match="sums to"):
        check_prior([0.5, 0.6, 0.1], 3, "here")
    with pytest.raises(CalbenchError, match="prior 0 where"):
        check_prior([0.5, 0.5, 0.0], 3, "here", positive=True)
    with pytest.raises(CalbenchError, match="eps must lie"):
        mixed_prior(train, test, 1.5)


def test_shifted_cell_risk_equals_the_risk_on_a_test_set_resampled_to_the_new_prior():
    from calbench.calibrators import make_calibrator
    from calbench.decision.shift import adapt_posteriors, long_tail_prior
    from calbench.runner.cell import run_cell
    from tests.runner.test_runner import plan

    base = ["method=ts", "dataset.n_test=100000"]
    plain = run_cell(plan(*base)).set_index("metric")["value"]
    none = run_cell(plan(*base, "shift=lt_stronger", "shift.eps=0")).set_index("metric")["value"]
    assert none["empirical_risk"] == pytest.approx(plain["empirical_risk"], abs=1e-12)
    shifted = run_cell(plan(*base, "shift=lt_stronger")).set_index("metric")["value"]
    # Reference: the same TS map, Bayes-corrected, scored on a resampled test set.
    data = plan(*base).load_dataset()
    ts = make_calibrator("ts").fit(data.logits_cal, data.y_cal)
    train = np.bincount(data.y_cal, minlength=3) / len(data.y_cal)
    accuracy = [(data.logits_cal.argmax(1) == data.y_cal)[data.y_cal == c].mean() for c in range(3)]
    test = long_tail_prior(accuracy, 1.5)
    probs = adapt_posteriors(ts.predict_proba(data.logits_test), train, test)
    rng = np.random.default_rng(0)
    ratio = test / train
    keep = rng.random(len(data.y_test)) < (ratio / ratio.max())[data.y_test]
    resampled = empirical_risk(probs[keep], data.y_test[keep], zero_one(3))
    assert shifted["empirical_risk"] == pytest.approx(resampled, rel=0.03)
    assert shifted["empirical_risk"] != pytest.approx(plain["empirical_risk"], rel=0.03)


def test_c100_superclass_sums_fine_probabilities_into_the_20_superclasses(tmp_path, rng):
    import pickle

    import yaml

    from calbench.data import load_dataset
    from calbench.simplex import softmax

    spec = yaml.safe_load(open("calbench/conf/dataset/c100_superclass.yaml", encoding="utf-8"))
    mapping = np.array(spec["fine_to_coarse"])
    assert (np.bincount(mapping) == 5).all()  # 20 superclasses of 5 fine classes each
    assert mapping[8] == 18 and mapping[13] == 18 and mapping[41] == 19  # bicycle, bus, mower
    z_cal, z_test = rng.normal(size=(300, 100)), rng.normal(size=(200, 100))
    y_cal, y_test = rng.integers(0, 100, 300), rng.integers(0, 100, 200)
    path = tmp_path / "fine.p"
    path.write_bytes(pickle.dumps(((z_cal, y_cal), (z_test, y_test))))
    data = load_dataset(
        "superclass_pickle", path=path, fine_to_coarse=spec["fine_to_coarse"], trusted=True
    )
    assert data.n_classes == 20
    np.testing.assert_array_equal(data.y_test, mapping[y_test])
    expected = np.stack([softmax(z_test)[:, mapping == c].sum(1) for c in range(20)], axis=1)
    np.testing.assert_allclose(data.probs_test, expected, atol=1e-12)


def _calibrated_posteriors(rng, n, k):
    """Posteriors of n inputs over k classes and labels drawn from them (so calibrated)."""
    z = rng.normal(size=(n, k)) * 2
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return p, (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)


def test_em_test_prior_equals_abstention_and_finds_the_shift():
    """Saerens et al.'s EM, as abstention's EMImbalanceAdapter runs it (same start, same
    stopping rule), on calibrated posteriors whose test set is resampled to another prior."""
    label_shift = pytest.importorskip("abstention.label_shift")
    from calbench.decision.shift import adapt_posteriors, em_test_prior

    rng = np.random.default_rng(0)
    n, k = 4000, 5
    p, y = _calibrated_posteriors(rng, 2 * n, k)
    valid, test, y_test = p[:n], p[n:], y[n:]
    keep = rng.random(n) < np.array([1.0, 0.33, 0.33, 0.1, 0.07])[y_test]
    test, y_test = test[keep], y_test[keep]
    train = valid.mean(axis=0)
    ours = em_test_prior(test, train)
    adapter = label_shift.EMImbalanceAdapter()(
        tofit_initial_posterior_probs=test, valid_posterior_probs=valid
    )
    np.testing.assert_allclose(ours, adapter.multipliers * train, atol=1e-12)
    np.testing.assert_allclose(adapt_posteriors(test, train, ours), adapter(test), atol=1e-12)
    true = np.bincount(y_test, minlength=k) / len(y_test)
    assert np.abs(ours - true).max() < 0.03 < np.abs(train - true).max()


@pytest.mark.parametrize("soft", [False, True])
def test_bbse_weights_equal_abstention_and_find_the_shift(soft):
    label_shift = pytest.importorskip("abstention.label_shift")
    from calbench.decision.shift import adapt_posteriors, bbse_weights

    rng = np.random.default_rng(1)
    n, k = 6000, 4
    p, y = _calibrated_posteriors(rng, 2 * n, k)
    valid, y_valid, test, y_test = p[:n], y[:n], p[n:], y[n:]
    keep = rng.random(n) < np.array([1.0, 0.5, 0.25, 0.1])[y_test]
    test, y_test = test[keep], y_test[keep]
    ours = bbse_weights(test, valid, y_valid, soft=soft)
    adapter = label_shift.BBSEImbalanceAdapter(soft=soft)(
        valid_labels=np.eye(k)[y_valid],
        tofit_initial_posterior_probs=test,
        valid_posterior_probs=valid,
    )
    np.testing.assert_allclose(ours, adapter.multipliers, atol=1e-10)
    prior = np.bincount(y_valid, minlength=k) / n
    np.testing.assert_allclose(
        adapt_posteriors(test, prior, prior * ours), adapter(test), atol=1e-10
    )
    true_ratios = (np.bincount(y_test, minlength=k) / len(y_test)) / prior
    assert np.abs(ours - true_ratios).max() < 0.05  # truth: 2.10, 1.09, 0.54, 0.22


def test_weighted_estimates_equal_the_estimates_on_the_repeated_test_set():
    """A prior shift simulated by importance weights: EM and BBSE on weighted test inputs
    give what they give on the test set with each input repeated weight times."""
    from calbench.decision.shift import bbse_weights, em_test_prior

    rng = np.random.default_rng(2)
    n, k = 1500, 4
    p, y = _calibrated_posteriors(rng, 2 * n, k)
    valid, y_valid, test, y_test = p[:n], y[:n], p[n:], y[n:]
    counts = np.array([4, 2, 1, 1])[y_test]
    repeated = np.repeat(test, counts, axis=0)
    train = np.bincount(y_valid, minlength=k) / n
    np.testing.assert_allclose(
        em_test_prior(test, train, weights=counts), em_test_prior(repeated, train), atol=1e-12
    )
    np.testing.assert_allclose(
        bbse_weights(test, valid, y_valid, weights=counts),
        bbse_weights(repeated, valid, y_valid),
        atol=1e-12,
    )


def test_an_estimated_test_prior_sits_between_ignoring_and_knowing_it():
    """The risk curve of a prior-shift task whose Bayes correction estimates the test prior
    (shift.estimate): on true posteriors, EM recovers nearly all of what knowing the prior
    gains over no correction, at every eps; at eps = 0 all three agree closely."""
    from calbench.decision.family import prior_shift_family
    from calbench.decision.shift import long_tail_prior, mixed_prior
    from calbench.runner.decision_task import DecisionTask

    rng = np.random.default_rng(3)
    n, k = 20000, 6
    z = rng.normal(size=(n, k)) * 1.5
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    train = np.bincount(y, minlength=k) / n
    target = long_tail_prior(np.arange(k, dtype=float), 1.5)
    loss = 1.0 - np.eye(k)
    curves = {}
    for estimate in ("known", "em", "none"):
        task = DecisionTask(
            loss,
            prior_shift_family(loss, train, target),
            1.0,
            {"points": 3, "direct_at": []},
            (train, mixed_prior(train, target, 1.0)),
            target,
            estimate,
        )
        curves[estimate] = np.array(list(task.curve_values(p, y).values()))
    known, em, none = curves["known"], curves["em"], curves["none"]
    assert np.abs(em - known).max() < 0.005
    assert none[-1] - known[-1] > 0.05  # the correction matters at eps = 1
    assert abs(none[0] - known[0]) < 0.005
