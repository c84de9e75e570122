"""Calibration tests by consistency resampling."""

import numpy as np
import pytest

from calbench import metrics
from calbench.data.synthetic import sample_labels


def _naive_p_value(ece_fn, p, y, n_resamples, seed):
    rng = np.random.default_rng(seed)
    observed = ece_fn(p, y)
    hits = sum(ece_fn(p, sample_labels(p, rng)) >= observed for _ in range(n_resamples))
    return hits / n_resamples


def test_classwise_p_value_equals_a_plain_loop(rng):
    p = rng.dirichlet([0.5] * 4, 300)
    y = sample_labels(p, rng)
    ours = metrics.classwise_ece_p_value(p, y, n_resamples=400, seed=5)
    assert ours == _naive_p_value(metrics.classwise_ece, p, y, 400, 5)


@pytest.mark.parametrize("kind", ["confidence", "classwise"])
def test_p_values_of_a_calibrated_predictor_are_roughly_uniform(kind):
    test = getattr(metrics, f"{kind}_ece_p_value")
    rng = np.random.default_rng(2024)
    p_values = []
    for seed in range(200):
        p = rng.dirichlet([0.6, 0.6, 0.6], 400)
        y = sample_labels(p, rng)
        p_values.append(test(p, y, n_resamples=300, seed=seed))
    share = np.mean(np.array(p_values) < 0.05)
    assert 0.02 <= share <= 0.09, share
    assert 0.4 < np.mean(p_values) < 0.6


@pytest.mark.parametrize("kind", ["confidence", "classwise"])
def test_a_miscalibrated_predictor_is_rejected(kind, synthetic):
    test = getattr(metrics, f"{kind}_ece_p_value")
    p = synthetic.probs_test[:5000]  # over-confident against its true map
    assert test(p, synthetic.y_test[:5000], n_resamples=2000) < 0.001
    accepted = getattr(metrics, f"{kind}_ece_accepted")
    assert accepted(p, synthetic.y_test[:5000], n_resamples=500) == 0.0
