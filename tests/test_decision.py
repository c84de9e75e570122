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
