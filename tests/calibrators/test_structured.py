"""Structured matrix / vector scaling (Berta et al. 2026) against probmetrics."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.simplex import log_softmax


def _overconfident(n, k, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    z[np.arange(n), rng.integers(0, k, n)] += 2
    truth = np.exp(z / 2) / np.exp(z / 2).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


def _objective(model, z, y, coef, intercept):
    """Berta et al.'s penalised log-loss on the model's features, in float64."""
    x = model._features(z)
    out = (x @ coef.T if coef.ndim == 2 else x * coef) + intercept
    value = -log_softmax(out)[np.arange(len(y)), y].mean()
    lam = model.penalties_
    diagonal = np.diag(coef) if coef.ndim == 2 else coef
    off = coef - np.diag(diagonal) if coef.ndim == 2 else np.zeros(1)
    return (
        value
        + lam["intercept"] * (intercept**2).sum()
        + lam["diagonal"] * ((diagonal - 1) ** 2).sum()
        + lam["off_diagonal"] * (off**2).sum()
    )


@pytest.mark.parametrize("name", ["sms", "svs"])
@pytest.mark.parametrize(("n", "k"), [(2000, 5), (3000, 20)])
def test_structured_scaling_matches_probmetrics(name, n, k):
    """The same penalised objective, minimised at least as well as probmetrics (which
    fits in float32 and stops at torchmin's default tolerance: its parameters differ from
    the float64 optimum by up to 2e-3, its objective by up to 4e-5); its probabilities and
    test log-loss therefore agree to 5e-3 and 1e-4."""
    calibrators = pytest.importorskip("probmetrics.calibrators")
    z, y = _overconfident(2 * n, k, seed=k)
    fit, test = slice(0, n), slice(n, None)
    ours = make_calibrator(name).fit(z[fit], y[fit])
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    ref = calibrators.get_calibrator(name)
    ref.fit(probs[fit], y[fit])
    assert ours.temperature_ == pytest.approx(1 / ref.ts_.cal_.invtemp_, rel=1e-5)
    if name == "sms":
        ref_coef, ref_intercept = ref.W_[:, :k].astype(float), ref.W_[:, k].astype(float)
    else:
        ref_coef, ref_intercept = ref.v_.astype(float), ref.b_.astype(float)
    ours_value = _objective(ours, z[fit], y[fit], ours.coef_, ours.intercept_)
    ref_value = _objective(ours, z[fit], y[fit], ref_coef, ref_intercept)
    assert ours_value <= ref_value + 1e-9
    assert ref_value - ours_value < 1e-4
    a, b = ours.predict_proba(z[test]), ref.predict_proba(probs[test])
    np.testing.assert_allclose(a, b, atol=5e-3)
    rows = np.arange(n)
    loss_ours = -np.log(a[rows, y[test]]).mean()
    assert loss_ours == pytest.approx(-np.log(b[rows, y[test]]).mean(), abs=1e-4)


def test_strong_penalties_give_temperature_scaling():
    z, y = _overconfident(1500, 6, seed=1)
    huge = {"lambda_intercept": 1e9, "lambda_diagonal": 1e9, "lambda_off_diagonal": 1e9}
    sms = make_calibrator("sms", **huge).fit(z, y)
    ts = make_calibrator("ts").fit(z, y)
    mixed = (1 - sms.uniform_weight_) * ts.predict_proba(z) + sms.uniform_weight_ / 6
    np.testing.assert_allclose(sms.predict_proba(z), mixed, atol=1e-6)


def test_sms_beyond_newton_classes_reaches_the_plain_lbfgs_minimum():
    """Above 36 classes SMS runs L-BFGS in curvature-scaled units from the diagonal minimum;
    it must find the minimum plain L-BFGS from the identity finds (same objective)."""
    from calbench.calibrators.matrix.structured import StructuredScaling
    from calbench.calibrators.parametric import ParametricCalibrator

    rng = np.random.default_rng(11)
    n, k = 1500, 40
    y = rng.integers(0, k, n)
    z = rng.normal(0, 1.5, (n, k))
    z[np.arange(n), y] += 3.0
    scaled = StructuredScaling(structure="matrix", tol=1e-9).fit(z, y)
    plain = StructuredScaling(structure="matrix", tol=1e-9)
    plain.temperature_ = scaled.temperature_  # the same features, fitted the old way
    plain.uniform_weight_ = scaled.uniform_weight_
    plain.penalties_ = scaled.penalties_
    plain.n_classes_, plain.classes_ = k, np.arange(k)
    ParametricCalibrator._fit(plain, z, y)
    assert scaled.loss_ <= plain.loss_ + 1e-9
    np.testing.assert_allclose(scaled.predict_proba(z), plain.predict_proba(z), atol=1e-4)


@pytest.mark.parametrize(("n", "k"), [(300, 400), (2600, 2000)])
def test_svs_log_loss_in_one_buffer_is_the_generic_chain_rule(n, k):
    """SVS's log-loss beyond Newton's class limit, in one (n, k) buffer reused across
    evaluations (`StructuredScaling._data_term`, `buffered_vector_log_loss`), returns the
    generic chain rule's numbers bit for bit, on one torch thread (300 x 400) and on all
    (2600 x 2000), including scales large enough that labels' probabilities fall below
    exp(EXP_FLOOR)."""
    from calbench.calibrators.matrix.structured import StructuredScaling
    from calbench.calibrators.parametric import ParametricCalibrator
    from calbench.criteria import get_criterion

    z, y = _overconfident(n, k, seed=k)
    model = StructuredScaling(structure="vector")
    model.temperature_, model.uniform_weight_ = 1.7, 1 / (n + 1)
    x = model._fitting_features(z)
    criterion = get_criterion("nll")
    ours = model._data_term(criterion, x, y)
    assert ours.__name__ == "log_loss"  # the buffer's path, not the generic one
    rng = np.random.default_rng(0)
    points = [
        (np.ones(k), np.zeros(k)),
        (1 + 0.1 * rng.normal(size=k), 0.2 * rng.normal(size=k)),
        (np.full(k, 150.0), rng.normal(size=k)),  # some labels' probabilities < exp(-700)
    ]
    for w, b in points:  # in turn: each evaluation overwrites the last one's buffer
        params = {"coef_": w, "intercept_": b}
        generic = ParametricCalibrator._data_term(model, criterion, x, y)(params)
        value, grads = ours(params)
        assert value == generic[0]
        for name in ("coef_", "intercept_"):
            np.testing.assert_array_equal(grads[name], generic[1][name])


def test_structured_features_softmax_over_its_argument_is_softmax():
    """The features' softmax written over its argument (rows wide enough for torch) is
    `softmax`'s bit for bit; narrow rows and a column-major array get a new array with
    `softmax`'s numbers and leave theirs as they were."""
    from calbench.simplex import softmax, softmax_over

    z = np.random.default_rng(3).normal(size=(500, 300)) * 4
    wide = z / 1.3
    assert softmax_over(wide) is wide  # written over it
    np.testing.assert_array_equal(wide, softmax(z / 1.3))
    for a in (z[:, :10] / 1.3, np.asfortranarray(z) / 1.3):
        before = a.copy()
        out = softmax_over(a)
        assert out is not a
        np.testing.assert_array_equal(a, before)
        np.testing.assert_array_equal(out, softmax(before))
