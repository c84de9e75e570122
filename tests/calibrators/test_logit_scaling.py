"""CalArena's binary methods against their references: probmetrics' BinaryLogisticCalibrator
(Platt on the logit, quadratic), scikit-learn's sigmoid calibration (Platt on the
probability, with Platt's targets), Kumar et al.'s scaling-binning, probmetrics'
CDFSplineCalibrator and netcal's ENIR as CalArena runs it."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.simplex import probs_to_logits


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


def _float32_binary(rng, n=3000):
    """`_binary` as CalArena stores a task: float32 probabilities (their logits for ours)."""
    probs, y = _binary(rng, n)
    p1 = probs[:, 1].astype(np.float32)
    return np.column_stack([1 - p1, p1]).astype(np.float32), y


def test_cdf_spline_equals_probmetrics(rng):
    """Gupta's spline on class 1's probability, as CalArena's CDF-Spline fits it; probmetrics
    sums the scores in float32, hence the 1e-5."""
    from probmetrics.calibrators import CDFSplineCalibrator

    probs, y = _float32_binary(rng)
    cal, test = slice(0, 2000), slice(2000, None)
    reference = CDFSplineCalibrator().fit(probs[cal], y[cal])
    theirs = np.clip(np.asarray(reference.predict_proba(probs[test]), dtype=np.float64), 0, 1)
    x = np.log(probs.astype(np.float64))
    ours = make_calibrator("cdf_spline").fit(x[cal], y[cal]).predict_proba(x[test])
    np.testing.assert_allclose(ours[:, 1], theirs[:, 1], atol=1e-5)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0)
    # A calibrating map: it moves the over-confident scores towards the labels.
    from calbench.metrics import log_loss

    assert log_loss(ours, y[test]) < log_loss(probs[test].astype(np.float64), y[test]) - 0.01


def test_enir_equals_netcal_as_calarena_runs_it(rng):
    from probmetrics.calibrators import NetcalENIRCalibrator

    probs, y = _float32_binary(rng, 1500)
    cal, test = slice(0, 1000), slice(1000, None)
    reference = NetcalENIRCalibrator().fit(probs[cal], y[cal])
    theirs = np.asarray(reference.predict_proba(probs[test]), dtype=np.float64)
    x = np.log(probs.astype(np.float64))
    model = make_calibrator("enir").fit(x[cal], y[cal])
    assert model.fallback_ == [False]
    np.testing.assert_allclose(model.predict_proba(x[test]), theirs, atol=1e-6)


def test_enir_falls_back_to_isotonic_regression_on_separable_data():
    """netcal's ENIR fails where the scores separate the classes (AUC = 1); CalArena then
    fits isotonic regression, and so does calbench, saying so."""
    from sklearn.isotonic import IsotonicRegression

    p1 = np.linspace(0.01, 0.99, 200).astype(np.float32)
    y = (p1 > 0.5).astype(int)
    x = np.log(np.column_stack([1 - p1, p1]).astype(np.float64))
    with pytest.warns(RuntimeWarning, match="isotonic regression instead"):
        model = make_calibrator("enir").fit(x, y)
    assert model.fallback_ == [True]
    expected = IsotonicRegression(out_of_bounds="clip").fit(p1, y).predict(p1)
    np.testing.assert_allclose(model.predict_proba(x)[:, 1], expected, atol=1e-7)


def test_scaling_binning_clips_the_logit_as_kumar_et_al_on_saturated_scores(rng):
    """Scores that round to 1 in float32 (a confident network, as CalArena stores it): their
    Platt step clips p into [1e-12, 1 - 1e-12] before the logit; unclipped, the logit
    difference of such a row is 708 and the fit and its bins move."""
    from calibration import PlattBinnerCalibrator

    z = rng.normal(8, 8, 4000)
    p1 = (1 / (1 + np.exp(-z))).astype(np.float32)
    y = (rng.random(4000) < np.where(p1 == 1, 0.9, 1 / (1 + np.exp(-z / 3)))).astype(int)
    assert (p1 == 1).mean() > 0.1
    probs = np.column_stack([1 - p1, p1]).astype(np.float32)
    cal, test = slice(0, 2500), slice(2500, None)
    theirs = PlattBinnerCalibrator(num_calibration=None, num_bins=10)
    theirs.train_calibration(p1[cal], y[cal])
    logits = probs_to_logits(probs)  # ln p, a zero at the float64 floor
    ours = make_calibrator("scaling_binning").fit(logits[cal], y[cal])
    expected = theirs.calibrate(p1[test])
    # their Platt is scikit-learn's L-BFGS at its default tolerance: within 3e-4
    np.testing.assert_allclose(ours.predict_proba(logits[test])[:, 1], expected, atol=3e-4)
    unclipped = make_calibrator("scaling_binning", clip=0).fit(logits[cal], y[cal])
    assert np.abs(unclipped.predict_proba(logits[test])[:, 1] - expected).max() > 1e-2
