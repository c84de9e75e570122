"""Hoki (Jang et al.): label-switch fractions, eqs. (1)-(2), Theorem 1 on the fitting data."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.calibrators.hoki.transforms import _alpha_beta, draw_noise, unchanged_fraction
from tests.conftest import overconfident_logits


@pytest.mark.parametrize("family", ["gaussian", "uniform"])
@pytest.mark.parametrize("spread", [0.3, 3.0, 20.0])
def test_unchanged_fraction_equals_the_argmax_of_every_perturbed_row(rng, family, spread):
    z = (3 * rng.normal(size=(150, 12))).astype(np.float32)
    noise = draw_noise(family, spread, 80, 12, seed=1).astype(np.float32)
    # The argmax of every perturbed row, in the float32 arithmetic Hoki uses.
    direct = ((z[:, None, :] + noise[None]).argmax(axis=2) == z.argmax(axis=1)[:, None]).mean(1)
    np.testing.assert_array_equal(unchanged_fraction(z, noise), direct)
    np.testing.assert_array_equal(unchanged_fraction(z, noise, block=7), direct)


def test_alpha_beta_follow_equations_1_and_2(rng):
    n, m, bins_n = 90, 40, 3
    z = 2 * rng.normal(size=(n, 5))
    y = rng.integers(0, 5, n)
    noise = draw_noise("gaussian", 1.5, m, 5, seed=2)
    gamma = unchanged_fraction(z, noise)
    correct = (z.argmax(1) == y).astype(float)
    bins = rng.integers(0, bins_n, n)
    alpha, beta = _alpha_beta(correct, gamma, bins, bins_n)
    same = (z[:, None, :] + noise[None]).argmax(2) == z.argmax(1)[:, None]  # (n, M)
    for j in range(bins_n):
        s = same[bins == j]
        c = correct[bins == j][:, None]
        assert alpha[j] == pytest.approx((c * s).sum() / s.sum(), rel=1e-12)
        assert beta[j] == pytest.approx((c * ~s).sum() / (~s).sum(), rel=1e-12)


def _bin_gaps(p, correct, n_bins=15):
    bins = np.minimum((p * n_bins).astype(int), n_bins - 1)
    return [abs(p[bins == j].mean() - correct[bins == j].mean()) for j in np.unique(bins)]


def test_theorem_1_holds_per_bin_on_the_fitting_data(rng):
    z, y = overconfident_logits(rng, 3000, 10)
    hoki = make_calibrator("hoki", n_transforms=300).fit(z, y)
    assert hoki.n_iter_ < hoki.max_iter  # converged: the partition stopped changing
    p = hoki.predict_confidence(z)
    correct = (z.argmax(1) == y).astype(float)
    # Mean confidence = alpha * gamma + beta * (1 - gamma) = the bin's accuracy, every bin.
    assert max(_bin_gaps(p, correct)) < 1e-12
    assert p.std() > 0.05  # and the confidences are spread over several bins
    assert len(np.unique(np.minimum((p * 15).astype(int), 14))) >= 4
    uncal = np.exp(z - z.max(1, keepdims=True))
    uncal /= uncal.sum(1, keepdims=True)
    assert max(_bin_gaps(uncal.max(1), correct)) > 0.05  # the input was over-confident


def test_search_picks_the_transformation_with_the_widest_confidences(rng):
    z, y = overconfident_logits(rng, 800, 6)
    spreads = (0.5, 2.0, 8.0)
    hoki = make_calibrator("hoki", n_transforms=200, spreads=spreads).fit(z, y)
    correct = (z.argmax(1) == y).astype(float)
    stds = {}
    for family in ("gaussian", "uniform"):
        for spread in spreads:
            gamma = unchanged_fraction(z, draw_noise(family, spread, 200, 6, seed=0))
            a, b = _alpha_beta(correct, gamma, np.zeros(len(y), int), 1)
            stds[(family, spread)] = np.std((a[0] - b[0]) * gamma + b[0])
    assert (hoki.family_, hoki.spread_) == max(stds, key=stds.get)
    assert hoki.sigma_ == pytest.approx(max(stds.values()))


def test_noise_that_never_switches_a_label_falls_back_to_the_accuracy(rng):
    z, y = overconfident_logits(rng, 500, 4)
    hoki = make_calibrator("hoki", family="gaussian", spread=1e-9, n_transforms=50).fit(z, y)
    p = hoki.predict_confidence(z)
    np.testing.assert_allclose(p, (z.argmax(1) == y).mean())  # alpha = beta = bin accuracy
    probs = hoki.predict_proba(z)
    assert np.isfinite(probs).all() and (probs.argmax(1) == z.argmax(1)).all()


def test_one_class_data_gives_finite_probabilities(rng):
    z = rng.normal(size=(200, 3))
    probs = make_calibrator("hoki", n_transforms=50).fit(z, np.zeros(200, int)).predict_proba(z)
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1)
