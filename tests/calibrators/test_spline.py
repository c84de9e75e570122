"""Spline recalibration (Gupta et al.) against an independent natural-spline basis."""

import numpy as np
import pytest

from calbench import metrics
from calbench.calibrators import make_calibrator
from calbench.calibrators.hoki.transforms import replace_top
from calbench.errors import CalbenchError


def _natural_basis_esl(x, knots):
    """Natural cubic spline basis of Hastie et al. (ESL eq. 5.4-5.5): 1, x, d_k - d_{K-1}."""

    def d(k):
        return (np.maximum(x - knots[k], 0) ** 3 - np.maximum(x - knots[-1], 0) ** 3) / (
            knots[-1] - knots[k]
        )

    columns = [np.ones_like(x), x] + [d(k) - d(len(knots) - 2) for k in range(len(knots) - 2)]
    return np.column_stack(columns)


def _fitted_gap_slope(gap, knots):
    """The derivative at the linspace fractiles of the least-squares natural spline of the
    cumulative gap, by central differences on the ESL basis (independent of the
    calibrator's CubicSpline derivative)."""
    t = np.linspace(0.0, 1.0, len(gap))
    coef, *_ = np.linalg.lstsq(_natural_basis_esl(t, knots), gap, rcond=None)
    step = 1e-6
    fitted = lambda x: _natural_basis_esl(np.clip(x, 0, 1), knots) @ coef  # noqa: E731
    slope = (fitted(t + step) - fitted(t - step)) / (2 * step)
    slope[0] = (fitted(t[:1] + step) - fitted(t[:1]))[0] / step
    slope[-1] = (fitted(t[-1:]) - fitted(t[-1:] - step))[0] / step
    return slope


def _gupta_reference(scores, hits, knots, new_scores):
    """Gupta's recalibrate.py written out with an independent spline basis: least squares of
    the cumulative (accuracy - score) at linspace fractiles, its derivative added back to the
    sorted scores, then linear interpolation of new scores (end values beyond)."""
    order = np.argsort(scores, kind="stable")
    s, n = scores[order], len(scores)
    slope = _fitted_gap_slope(np.cumsum(hits[order] - s) / n, knots)
    return np.clip(np.interp(new_scores, s, s + slope), 0, 1)


def test_top1_spline_is_guptas_recalibration(synthetic):
    cal = make_calibrator("spline", pseudo_count=0, n_knots=7).fit(
        synthetic.logits_cal, synthetic.y_cal
    )
    p = synthetic.probs_cal
    hits = (p.argmax(axis=1) == synthetic.y_cal).astype(float)
    new = synthetic.probs_test.max(axis=1)[:2000]
    ref = _gupta_reference(p.max(axis=1), hits, cal.knots_, new)
    np.testing.assert_allclose(cal.recalibrate(new), ref, atol=1e-6)
    out = cal.predict_proba(synthetic.logits_test[:2000])
    np.testing.assert_allclose(out.max(axis=1), ref, atol=1e-6)  # the vector carries it


def _softmax_scipy_1_5(z):
    """scipy 1.5's ``softmax``: ``exp(z - logsumexp(z))``, its logsumexp transcribed, on
    float32 logits."""
    z = z.astype(np.float32)
    a_max = np.amax(z, axis=1, keepdims=True)
    out = np.log(np.sum(np.exp(z - a_max), axis=1, keepdims=True))
    out += a_max
    return np.exp(z - out)


def _recalibration_function(scores, labels, knots, argsort):
    """recalibrate.py's ``get_recalibration_function`` (the calibration rows sorted by score
    with ``argsort``, his ``scores.argsort()``; the float32 cumulative score; an independent
    spline basis) and its ``interpolated_function`` with ``first_above``, clipped to [0, 1]
    as ``do_plots``."""
    import bisect

    order = argsort(scores)
    scores, labels, n = scores[order], labels[order], len(scores)
    gap = np.cumsum(labels) / n - np.cumsum(scores) / n  # float32 cumsum of the scores
    acc = _fitted_gap_slope(gap, knots) + scores
    xs = [float(s) for s in scores]

    def recal(x):
        if x >= xs[-1]:
            return acc[-1]
        if x <= xs[0]:
            return acc[0]
        ind = bisect.bisect_left(xs, x)  # first_above: the first x[ind] >= x
        alpha, beta = x - xs[ind - 1], xs[ind] - x
        return float((beta * acc[ind] + alpha * acc[ind - 1]) / (alpha + beta))

    return lambda new: np.clip([recal(float(s)) for s in new], 0.0, 1.0)


def _recalibrate_py(logits, y, new_logits, knots, argsort):
    """Gupta's recalibrate.py top-1 path written out: scipy 1.5's softmax in float32 and
    `_recalibration_function` on the top scores."""
    p, q = _softmax_scipy_1_5(logits), _softmax_scipy_1_5(new_logits)
    scores, labels = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    return _recalibration_function(scores, labels, knots, argsort)(q.max(axis=1))


def _numpy1_argsort(scores):
    """``scores.argsort()`` under numpy 1.x: its introsort, which numpy 2 still runs for
    int16 (the scores' dense ranks here)."""
    return np.argsort(np.unique(scores, return_inverse=True)[1].astype(np.int16))


def test_reference_code_spline_is_guptas_recalibrate_py(rng):
    """The *_gupta_code procedure (the pack gupta2021's ``spline_gupta_code``) on a small
    seeded case with many float32 confidences tied at exactly 1.0 (as on DenseNet-40
    CIFAR-10): its calibrated confidences are recalibrate.py's under numpy 1.x, ties in its
    introsort's order, and the output vectors carry them; a drawn order of the ties
    (``seed``) is recalibrate.py's with that order."""
    from calbench.calibrators import registered_calibrator
    from calbench.papers.gupta2021.recalibrate import scipy_2020_softmax
    from tests.conftest import overconfident_logits

    logits, y = overconfident_logits(rng, 600, 4, scale=25.0)
    new = overconfident_logits(rng, 300, 4, scale=25.0)[0]
    ties = (logits.max(axis=1) - np.sort(logits, axis=1)[:, -2] > 17).sum()
    assert ties > 100  # float32 confidences of exactly 1.0

    def code_spline(seed):
        return registered_calibrator("spline_gupta_code", pseudo_count=0, n_knots=6, seed=seed).fit(
            logits, y
        )

    def drawn(seed):
        permutation = np.random.default_rng(seed).permutation(len(y))
        return lambda scores: permutation[np.argsort(scores[permutation], kind="stable")]

    for seed, argsort in [(None, _numpy1_argsort), (7, drawn(7))]:
        cal = code_spline(seed)
        ref = _recalibrate_py(logits, y, new, cal.knots_, argsort)
        np.testing.assert_allclose(cal.recalibrate(scipy_2020_softmax(new).max(axis=1)), ref)
        # the vectors carry them where a top class can have them (at least 1 / k)
        top, feasible = cal.predict_proba(new).max(axis=1), ref > 1 / 4
        assert feasible.sum() > 250
        np.testing.assert_allclose(top[feasible], ref[feasible], atol=1e-6)
    stable = _recalibrate_py(logits, y, new, cal.knots_, lambda s: np.argsort(s, kind="stable"))
    numpy1 = code_spline(None).recalibrate(scipy_2020_softmax(new).max(axis=1))
    assert not np.allclose(numpy1, stable, atol=1e-4)  # the order of the ties moves the fit


def test_spline_brings_ks_near_zero_and_keeps_accuracy(synthetic):
    cal = make_calibrator("spline", pseudo_count=0, n_knots=6).fit(
        synthetic.logits_cal, synthetic.y_cal
    )
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
        make_calibrator("spline", pseudo_count=0, n_knots=14).fit(
            rng.normal(size=(20, 3)), np.arange(20) % 3
        )


def _feasible_second(out, wanted):
    """Rows where a second value ``wanted`` fits a vector with the output's top value: below
    the top and the mass left, and large enough for the rest to fit under it."""
    top, k = out.max(axis=1), out.shape[1]
    margin = 1 - 1e-6
    return (
        (wanted < top * margin)
        & (wanted < (1 - top) * margin)
        & (wanted > (1 - top) / (k - 1) / margin)
    )


def test_top2_spline_calibrates_the_second_score_and_keeps_the_ranking(rng):
    from calbench.simplex import softmax
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 6000, 10)
    zt, yt = overconfident_logits(rng, 6000, 10)
    top1 = make_calibrator("spline", pseudo_count=0, ranks=1).fit(z, y)
    top2 = make_calibrator("spline", pseudo_count=0, ranks=2).fit(z, y)
    # The second spline is Gupta's fit on the second-largest score against "label = 2nd".
    p, pt = softmax(z), softmax(zt)
    second = np.sort(p, axis=1)[:, -2]
    hit = (np.argsort(-p, axis=1, kind="stable")[:, 1] == y).astype(float)
    ref = _gupta_reference(second, hit, top2.knots_, np.sort(pt, axis=1)[:, -2])
    out = top2.predict_proba(zt)
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-12)
    ranked = np.argsort(-pt, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(np.argsort(-out, axis=1, kind="stable")[:, :2], ranked)
    np.testing.assert_allclose(out.max(axis=1), top1.predict_proba(zt).max(axis=1))
    # The output's second value is the second spline's wherever a vector with this ranking
    # can carry it (water-filling).
    feasible = _feasible_second(out, ref)
    assert feasible.mean() > 0.9
    np.testing.assert_allclose(np.sort(out, axis=1)[feasible, -2], ref[feasible], atol=1e-6)
    before = metrics.ks_error(pt, yt, mode="top", r=2)
    after = metrics.ks_error(out, yt, mode="top", r=2)
    assert after < 0.01 < before


def test_top2_spline_on_near_one_hot_rows_is_finite_and_on_the_simplex(rng):
    """Runner-up probabilities in the subnormal range (or exactly 0) once gave NaN rows."""
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 3000, 10)
    cal = make_calibrator("spline", pseudo_count=0, ranks=2).fit(z, y)
    zt = rng.normal(size=(6, 10))
    zt[:, 0] += np.array([700.0, 740.0, 745.0, 800.0, 60.0, 5.0])  # p2 ~ 1e-304 ... 0
    out = cal.predict_proba(zt)
    assert np.isfinite(out).all() and (out >= 0).all()
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-12)
    assert (out.argmax(axis=1) == 0).all()


def test_top2_floor_rarely_binds_on_real_shaped_data(rng):
    """The order-keeping floor used to bind in most rows and made top-2 KS worse than
    uncalibrated; water-filling leaves the calibrated second value in (nearly) every row."""
    from calbench.simplex import softmax
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 5000, 10, scale=4.0)
    zt, yt = overconfident_logits(rng, 5000, 10, scale=4.0)
    cal = make_calibrator("spline", pseudo_count=0, ranks=2).fit(z, y)
    out = cal.predict_proba(zt)
    wanted = cal.recalibrate(np.sort(softmax(zt), axis=1)[:, -2], rank=2)
    feasible = _feasible_second(out, wanted)
    assert feasible.mean() > 0.9
    np.testing.assert_allclose(np.sort(out, axis=1)[feasible, -2], wanted[feasible], atol=1e-9)
    uncal = metrics.ks_error(softmax(zt), yt, mode="top", r=2)
    assert metrics.ks_error(out, yt, mode="top", r=2) < uncal


def test_within_top2_spline_calibrates_the_top2_total(rng):
    from calbench.simplex import softmax
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 6000, 10)
    cal = make_calibrator("spline", pseudo_count=0, within_top=2).fit(z, y)
    out = cal.predict_proba(z)
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-12)
    assert (out.argmax(axis=1) == z.argmax(axis=1)).all()
    before = metrics.ks_error(softmax(z), y, mode="within_top", r=2)
    assert metrics.ks_error(out, y, mode="within_top", r=2) < 0.3 * before


def test_within_top2_alone_carries_guptas_recalibrated_total(rng):
    """ranks=0: the summed top-2 score alone, as Gupta's Table 4 (every row carries it)."""
    from calbench.simplex import softmax
    from tests.conftest import overconfident_logits

    z, y = overconfident_logits(rng, 5000, 10, scale=4.0)
    zt, yt = overconfident_logits(rng, 5000, 10, scale=4.0)
    cal = make_calibrator("spline", pseudo_count=0, n_knots=14, ranks=0, within_top=2).fit(z, y)
    p, pt = softmax(z), softmax(zt)
    ranked = np.argsort(-p, axis=1, kind="stable")[:, :2]
    hits = (ranked == y[:, None]).any(axis=1).astype(float)
    summed = np.sort(pt, axis=1)[:, -2:].sum(axis=1)
    ref = _gupta_reference(np.sort(p, axis=1)[:, -2:].sum(axis=1), hits, cal.knots_, summed)
    out = cal.predict_proba(zt)
    np.testing.assert_allclose(np.sort(out, axis=1)[:, -2:].sum(axis=1), ref, atol=1e-6)
    top2 = np.argsort(-pt, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(np.argsort(-out, axis=1, kind="stable")[:, :2], top2)
    np.testing.assert_allclose(out.sum(axis=1), 1, atol=1e-12)
