"""CalArena's binary logistic maps against their references: probmetrics'
BinaryLogisticCalibrator (Platt on the logit, quadratic) and scikit-learn's sigmoid
calibration (Platt on the probability, with Platt's targets)."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator


def _binary(rng, n=4000):
    """Over-confident binary scores: true logit u, reported 2.5 u + 0.3."""
    u = rng.normal(0, 1.5, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-u))).astype(int)
    s = 2.5 * u + 0.3
    p1 = 1 / (1 + np.exp(-s))
    return np.column_stack([1 - p1, p1]), y


@pytest.mark.parametrize("name, kind", [("platt_logits", "affine"), ("quadratic", "quadratic")])
def test_logit_maps_equal_probmetrics(rng, name, kind):
    from probmetrics.calibrators import BinaryLogisticCalibrator

    from calbench.metrics import log_loss

    probs, y = _binary(rng)
    ours = make_calibrator(name).fit(np.log(probs), y).predict_proba(np.log(probs))
    reference = BinaryLogisticCalibrator(type=kind)
    reference.fit(probs, y)
    theirs = np.asarray(reference.predict_proba(probs), dtype=np.float64)
    # probmetrics returns float32 and stops at scikit-learn's L-BFGS tolerance: the maps
    # agree to 1e-4, and Newton's exact optimum has the lower training log-loss.
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    assert log_loss(ours, y) <= log_loss(theirs / theirs.sum(axis=1, keepdims=True), y) + 1e-7


def test_platt_on_probabilities_equals_scikit_learns_sigmoid_calibration(rng):
    from sklearn.calibration import _sigmoid_calibration

    probs, y = _binary(rng)
    a, b = _sigmoid_calibration(probs[:, 1], y)
    expected = 1 / (1 + np.exp(a * probs[:, 1] + b))
    ours = make_calibrator("platt_probs").fit(np.log(probs), y).predict_proba(np.log(probs))
    np.testing.assert_allclose(ours[:, 1], expected, atol=1e-6)


def test_platt_on_the_logit_undoes_an_affine_distortion(rng):
    """Scores reported as 2.5 u + 0.3 of the true logit u: the fitted map is about
    u = (s - 0.3) / 2.5, so its weights are near (-0.12, 0.4)."""
    probs, y = _binary(rng, 200_000)
    model = make_calibrator("platt_logits").fit(np.log(probs), y)
    np.testing.assert_allclose(model.coef_[0], [-0.3 / 2.5, 1 / 2.5], atol=0.01)


def test_more_classes_are_mapped_one_vs_rest_and_renormalised(rng):
    z = rng.normal(size=(600, 4)) * 2
    y = rng.integers(0, 4, 600)
    model = make_calibrator("platt_logits").fit(z, y)
    probs = model.predict_proba(z)
    assert model.coef_.shape == (4, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


def test_scaling_binning_equals_kumar_et_als_platt_binner(rng):
    """Against their code (the uncertainty-calibration package's PlattBinnerCalibrator,
    which CalArena's Scaling-Binning calls): the same ten values, the same bin of each test
    point (their Platt is scikit-learn's L-BFGS at C = 1e10, ours Newton's exact fit)."""
    from calibration import PlattBinnerCalibrator

    probs, y = _binary(rng)
    theirs = PlattBinnerCalibrator(num_calibration=None, num_bins=10)
    theirs.train_calibration(probs[:, 1], y)
    test, _ = _binary(np.random.default_rng(7), 2000)
    ours = make_calibrator("scaling_binning").fit(np.log(probs), y)
    predicted = ours.predict_proba(np.log(test))[:, 1]
    np.testing.assert_allclose(predicted, theirs.calibrate(test[:, 1]), atol=1e-4)
    assert len(np.unique(predicted)) <= 10
