"""Spline recalibration (Gupta et al.) against an independent natural-spline basis."""

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from calbench import metrics
from calbench.calibrators import make_calibrator
from calbench.calibrators.spline import replace_top
from calbench.errors import CalbenchError


def _natural_basis_esl(x, knots):
    """Natural cubic spline basis of Hastie et al. (ESL eq. 5.4-5.5): 1, x, d_k - d_{K-1}."""

    def d(k):
        return (np.maximum(x - knots[k], 0) ** 3 - np.maximum(x - knots[-1], 0) ** 3) / (
            knots[-1] - knots[k]
        )

    columns = [np.ones_like(x), x] + [d(k) - d(len(knots) - 2) for k in range(len(knots) - 2)]
    return np.column_stack(columns)


def test_least_squares_natural_spline_matches_an_independent_basis(synthetic):
    cal = make_calibrator("spline", n_knots=7).fit(synthetic.logits_cal, synthetic.y_cal)
    p = synthetic.probs_cal
    order = np.argsort(p.max(axis=1), kind="stable")
    correct = (p.argmax(axis=1) == synthetic.y_cal)[order]
    n = len(correct)
    t = np.arange(1, n + 1) / n
    h = np.cumsum(correct) / n
    basis = _natural_basis_esl(t, cal.knots_)
    coef, *_ = np.linalg.lstsq(basis, h, rcond=None)
    ours = CubicSpline(cal.knots_, cal.knot_values_[0], bc_type="natural")(t)
    np.testing.assert_allclose(ours, basis @ coef, atol=1e-10)


def test_spline_brings_ks_near_zero_and_keeps_accuracy(synthetic):
    cal = make_calibrator("spline", n_knots=6).fit(synthetic.logits_cal, synthetic.y_cal)
    before = metrics.ks_error(synthetic.probs_cal, synthetic.y_cal)
    p = cal.predict_proba(synthetic.logits_cal)
    assert before > 0.05 and metrics.ks_error(p, synthetic.y_cal) < 0.01
    test = cal.predict_proba(synthetic.logits_test)
    assert metrics.ks_error(test, synthetic.y_test) < 0.5 * metrics.ks_error(
        synthetic.probs_test, synthetic.y_test
    )
    assert (test.argmax(axis=1) == synthetic.probs_test.argmax(axis=1)).all()


def test_replace_top_keeps_the_simplex_and_the_class():
    probs = np.array([[0.5, 0.3, 0.2], [1.0, 0.0, 0.0], [0.45, 0.44, 0.11]])
    out = replace_top(probs, np.array([0.8, 0.9, 0.2]))
    np.testing.assert_allclose(out.sum(axis=1), 1)
    np.testing.assert_allclose(out[0], [0.8, 0.12, 0.08])
    np.testing.assert_allclose(out[1], [0.9, 0.05, 0.05])
    assert out[2].argmax() == 0  # 0.2 would let class 1 overtake: raised to the bound


def test_too_many_knots_for_the_data_is_clear(rng):
    with pytest.raises(CalbenchError, match="at least 28 calibration samples for 14 knots"):
        make_calibrator("spline", n_knots=14).fit(rng.normal(size=(20, 3)), np.arange(20) % 3)


def test_top2_spline_calibrates_the_second_score_and_keeps_the_ranking(rng):
    from calbench.simplex import softmax
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 6000, 10)
    zt, yt = overconfident_logits(rng, 6000, 10)
    top1 = make_calibrator("spline", ranks=1).fit(z, y)
    top2 = make_calibrator("spline", ranks=2).fit(z, y)
    # The second spline is Gupta's fit on the second-largest score against "label = 2nd".
    p = softmax(z)
    second = np.sort(p, axis=1)[:, -2]
    hit = np.argsort(-p, axis=1, kind="stable")[:, 1] == y
    order = np.argsort(second, kind="stable")
    t = np.arange(1, len(y) + 1) / len(y)
    basis = _natural_basis_esl(t, top2.knots_)
    coef, *_ = np.linalg.lstsq(basis, np.cumsum(hit[order]) / len(y), rcond=None)
    ours = CubicSpline(top2.knots_, top2.knot_values_[1], bc_type="natural")(t)
    np.testing.assert_allclose(ours, basis @ coef, atol=1e-10)
    out = top2.predict_proba(zt)
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-12)
    ranked = np.argsort(-softmax(zt), axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(np.argsort(-out, axis=1, kind="stable")[:, :2], ranked)
    np.testing.assert_allclose(out.max(axis=1), top1.predict_proba(zt).max(axis=1))
    before = metrics.ks_error(top1.predict_proba(zt), yt, mode="top", r=2)
    after = metrics.ks_error(out, yt, mode="top", r=2)
    assert after < 0.01 < before


def test_within_top2_spline_calibrates_the_top2_total(rng):
    from calbench.simplex import softmax
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 6000, 10)
    cal = make_calibrator("spline", within_top=2).fit(z, y)
    out = cal.predict_proba(z)
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-12)
    assert (out.argmax(axis=1) == z.argmax(axis=1)).all()
    before = metrics.ks_error(softmax(z), y, mode="within_top", r=2)
    assert metrics.ks_error(out, y, mode="within_top", r=2) < 0.3 * before
