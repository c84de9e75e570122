"""Top-versus-all calibration (Le Coz et al. 2024) against netcal's binary maps, the
reference's torch criterion and a direct one-dimensional search."""

import numpy as np
import pytest
import torch
from netcal.binning import HistogramBinning as NetcalHistogram
from netcal.binning import IsotonicRegression as NetcalIsotonic
from scipy.optimize import minimize_scalar

from calbench.calibrators import make_calibrator
from calbench.calibrators.reductions.top_versus_all import share_below
from calbench.criteria import top_label_bce
from calbench.simplex import softmax


def _overconfident(n, k, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3
    truth = softmax(z / 2)
    y = (truth.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


def _reference_bce(logits, y):
    """The reference's loss: torch's binary_cross_entropy(max softmax, correct)."""
    probs = torch.softmax(torch.as_tensor(logits), dim=1)
    confidence, predicted = probs.max(dim=1)
    correct = (predicted == torch.as_tensor(y)).double()
    return torch.nn.functional.binary_cross_entropy(confidence, correct)


def test_top_label_bce_and_its_gradient_equal_the_references_torch_loss():
    z, y = _overconfident(500, 7, 0)
    value, grad = top_label_bce(z, y)
    logits = torch.tensor(z, requires_grad=True)
    reference = _reference_bce(logits, y)
    reference.backward()
    assert value == pytest.approx(reference.item(), rel=1e-12)
    np.testing.assert_allclose(grad, logits.grad.numpy(), atol=1e-15)


def test_top_label_bce_stays_finite_where_torch_clamps():
    """A wrong prediction 60 logits ahead: log(1 - q) = -60 exactly, where torch's
    binary_cross_entropy clamps the log at -100 and float64 1 - q has long lost it."""
    z = np.array([[60.0, 0.0, 0.0]])
    value, grad = top_label_bce(z, np.array([1]))
    assert value == pytest.approx(60.0 - np.log(2.0), rel=1e-12)
    assert np.all(np.isfinite(grad))


def test_tva_temperature_is_the_minimiser_of_the_top_label_bce():
    z, y = _overconfident(2000, 10, 1)
    model = make_calibrator("ts", criterion="top_label_bce").fit(z, y)
    search = minimize_scalar(
        lambda t: float(_reference_bce(z / t, y)),
        bounds=(0.1, 10),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert model.temperature_ == pytest.approx(search.x, rel=1e-5)
    # The data are over-confident at temperature 2; TvA's temperature is its own answer.
    assert 1.2 < model.temperature_ < 3.0


@pytest.mark.parametrize(
    ("params", "reference"),
    [
        ({"binary": "isotonic"}, lambda: NetcalIsotonic()),
        (
            {"binary": "histogram", "binning": "equal_size"},
            lambda: NetcalHistogram(15, equal_intervals=False),
        ),
        (
            {"binary": "histogram", "binning": "equal_width"},
            lambda: NetcalHistogram(15, equal_intervals=True),
        ),
    ],
    ids=["isotonic", "histogram_equal_mass", "histogram_equal_width"],
)
def test_tva_binary_maps_equal_netcal_on_the_confidence(params, reference):
    """The reference (allglc/tva-calibration) fits netcal's maps on (confidence, correct)
    and reports their output at the test confidences with the original prediction: the
    calibrated rows' maximum is that output and their arg max that prediction."""
    z, y = _overconfident(3000, 10, 2)
    test, _ = _overconfident(1000, 10, 3)
    probs, test_probs = softmax(z), softmax(test)
    ref = reference()
    ref.fit(probs.max(axis=1), (probs.argmax(axis=1) == y).astype(int))
    if params.get("binning") == "equal_size":
        ref.equal_intervals = True  # the reference's own workaround for netcal's transform
    expected = ref.transform(test_probs.max(axis=1))
    model = make_calibrator("tva", **params).fit(z, y)
    out = model.predict_proba(test)
    calibrated = model.calibrated_confidence(test)
    if params.get("binning") == "equal_size":
        # netcal cuts equal-mass bins at np.quantile's interpolated points (and assigns
        # training scores left-closed, test scores right-closed); calbench's equal_size
        # bins end at calibration scores. The test confidences near an edge fall in the
        # neighbouring bin: 1% of them here, the rest equal.
        differ = np.abs(calibrated - expected) > 1e-12
        assert differ.mean() <= 0.02
        expected = np.where(differ, calibrated, expected)
    np.testing.assert_allclose(calibrated, expected, atol=1e-12)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)
    # Where c' >= 1/k the row keeps the prediction and reads c'; below (isotonic maps the
    # lowest confidences, never right in these data, to 0) no row can keep it.
    keeps = expected >= 0.1
    assert keeps.mean() > 0.98
    np.testing.assert_allclose(out.max(axis=1)[keeps], expected[keeps], atol=1e-12)
    np.testing.assert_array_equal(out.argmax(axis=1)[keeps], test_probs.argmax(axis=1)[keeps])
    top = test_probs.argmax(axis=1)[~keeps]
    np.testing.assert_allclose(out[~keeps, top], expected[~keeps], atol=1e-12)
    # The binary map lowered these over-confident confidences a lot: proportional shares
    # alone would have moved the arg max of a third of the rows.
    assert np.mean(expected) < np.mean(test_probs.max(axis=1)) - 0.1


def test_share_below_water_fills_under_the_cap():
    probs = np.array([[0.5, 0.3, 0.15, 0.05], [1.0, 0.0, 0.0, 0.0], [0.4, 0.3, 0.2, 0.1]])
    top = np.array([0, 0, 0])
    total = np.array([0.7, 0.6, 0.85])
    cap = np.array([0.3, 0.4, 0.15])
    out = share_below(probs, top, total, cap)
    # Row 0: 0.7 in proportion 6:3:1 would give 0.42 > 0.3, so class 1 sits at the cap and
    # classes 2 and 3 share 0.4 as 3:1.
    np.testing.assert_allclose(out[0], [0, 0.3, 0.3, 0.1])
    # Row 1: nothing outside the top class: an even share, 0.2 each.
    np.testing.assert_allclose(out[1], [0, 0.2, 0.2, 0.2])
    # Row 2: three classes at a cap of 0.15 hold 0.45 < 0.85: the plain proportional share.
    np.testing.assert_allclose(out[2], np.array([0, 0.3, 0.2, 0.1]) * 0.85 / 0.6)


def test_rows_stay_finite_where_the_other_classes_underflow():
    """Logits 200+ apart leave the other classes subnormal probabilities; a calibrated
    confidence below 1/k then shares the rest in proportion to them without overflowing
    (hypothesis found scale 219, seed 1 in test_outputs_stay_on_the_simplex_for_any_logits)."""
    gen = np.random.default_rng(1)
    z = gen.normal(size=(120, 4)) * 219.0
    y = np.arange(120) % 4
    probs = make_calibrator("tva").fit(z, y).predict_proba(gen.normal(size=(60, 4)) * 219.0)
    assert np.isfinite(probs).all() and (probs >= 0).all()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
