"""Gupta et al.'s Table 5 procedure (the pack gupta2021's ``spline_gupta_every_rank_code``)
against recalibrate.py's arithmetic written out independently."""

import numpy as np
import pytest

from calbench import metrics
from calbench.calibrators import registered_calibrator
from tests.calibrators.test_spline import (
    _numpy1_argsort,
    _recalibration_function,
    _softmax_scipy_1_5,
)


def _get_top_results(scores, labels, nn):
    """recalibrate.py's ``get_top_results``: the nn-th largest score of each row (nn < 0)
    by ``np.argpartition``, and whether the label is that class."""
    topn = [np.argpartition(score, nn)[nn] for score in scores]
    nth = np.array([score[n] for score, n in zip(scores, topn, strict=True)])
    return nth, np.array(
        [1.0 if int(label) == int(n) else 0.0 for label, n in zip(labels, topn, strict=True)]
    )


def _every_rank_reference(logits, y, new_logits, n_knots, argsort):
    """Table 5's prediction as recalibrate.py's pieces give it: the spline of rank r
    (``nn = -r``) fitted and applied for every r = 1..K, each class given its rank's
    recalibrated score; returns those scores (rows unnormalised)."""
    p, q = _softmax_scipy_1_5(logits), _softmax_scipy_1_5(new_logits)
    k = p.shape[1]
    out = np.zeros(q.shape)
    for r in range(1, k + 1):
        scores, hits = _get_top_results(p, y, -r)
        recal = _recalibration_function(scores, hits, np.linspace(0.0, 1.0, n_knots), argsort)
        cls = np.array([np.argpartition(row, -r)[-r] for row in q])
        out[np.arange(len(q)), cls] = recal(q[np.arange(len(q)), cls])
    return out


def _confident_logits(rng, n):
    """4-class logits whose predicted class leads by 0 to 30 (right 70% of the time and
    more): float32 top scores of exactly 1.0 beyond about 17, none underflowing to 0."""
    y = rng.integers(0, 4, n)
    z = rng.normal(size=(n, 4)) * 2
    predicted = np.where(rng.random(n) < 0.7, y, rng.integers(0, 4, n))
    z[np.arange(n), predicted] += rng.uniform(0, 30, n)
    return z, y


def test_every_rank_twin_is_recalibrate_py_on_every_rank():
    """On a seeded case with many float32 top scores tied at 1.0 (as on DenseNet-40
    CIFAR-10), the twin's output is recalibrate.py's spline applied to every rank, ties in
    numpy 1.x's order, rows divided by their sums; its predicted class is the largest
    recalibrated score, which here differs from the uncalibrated one on some rows, and so
    does the accuracy."""
    rng = np.random.default_rng(0)
    logits, y = _confident_logits(rng, 600)
    new, y_new = _confident_logits(rng, 400)
    p = _softmax_scipy_1_5(logits)
    assert (p.max(axis=1) == 1.0).sum() > 100
    # no tied scores within a row: argpartition and a stable ranking give the same ranks
    assert all(len(set(row)) == 4 for row in np.vstack([p, _softmax_scipy_1_5(new)]))

    cal = registered_calibrator("spline_gupta_every_rank_code", n_knots=6).fit(logits, y)
    out = cal.predict_proba(new)
    ref = _every_rank_reference(logits, y, new, 6, _numpy1_argsort)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(out, ref / ref.sum(axis=1, keepdims=True), atol=1e-9)
    np.testing.assert_array_equal(out.argmax(axis=1), ref.argmax(axis=1))
    uncal = _softmax_scipy_1_5(new).argmax(axis=1)
    changed = out.argmax(axis=1) != uncal
    assert changed.sum() >= 3  # the ranking is not kept, unlike the library's spline
    assert metrics.accuracy(out, y_new) == pytest.approx(np.mean(ref.argmax(axis=1) == y_new))
    assert metrics.accuracy(out, y_new) != pytest.approx(np.mean(uncal == y_new))
    # the top rank's spline is spline_gupta_code's (Tables 1 and 6)
    top = registered_calibrator("spline_gupta_code", n_knots=6).fit(logits, y)
    q = _softmax_scipy_1_5(new).astype(np.float64)
    np.testing.assert_allclose(cal.recalibrate(q.max(axis=1)), top.recalibrate(q.max(axis=1)))


@pytest.mark.slow
def test_every_rank_twin_gives_table_5_on_densenet40(published_logits):
    """DenseNet-40 CIFAR-10: Gupta's Table 5 prints 92.31% for the spline, 92.42%
    uncalibrated; the twin (numpy 1.x's order of the 3257 calibration top scores tied at
    1.0) gives 92.31%, as recalibrate.py's pieces written out here do; a stable sort of
    the ties 92.32%."""
    from tests.conftest import load_network

    data = load_network("c10_densenet40", published_logits)
    cal = registered_calibrator("spline_gupta_every_rank_code", n_knots=6)
    cal.fit(data.logits_cal, data.y_cal)
    accuracy = metrics.accuracy(cal.predict_proba(data.logits_test), data.y_test)
    assert round(100 * accuracy, 2) == 92.31
    ref = _every_rank_reference(data.logits_cal, data.y_cal, data.logits_test, 6, _numpy1_argsort)
    assert np.mean(ref.argmax(axis=1) == data.y_test) == pytest.approx(accuracy)
    stable = _every_rank_reference(
        data.logits_cal, data.y_cal, data.logits_test, 6, lambda s: np.argsort(s, kind="stable")
    )
    assert round(100 * np.mean(stable.argmax(axis=1) == data.y_test), 2) == 92.32


def _plot_ks_graphs_float32(probs32, y, within_top2=False):
    """Gupta's ``plot_KS_graphs`` on a float32 array, written out step by step: the top
    score (or the float32 sum of the top two), numpy 1.x's ``argsort`` of them, the running
    sum as float32 scalars one addition at a time, divided by N in float32, against the
    float64 running count of hits."""
    rows = range(len(y))
    if within_top2:
        two = [np.argpartition(p, -2)[-2:] for p in probs32]
        scores = np.array(
            [np.float32(p[t[0]]) + np.float32(p[t[1]]) for p, t in zip(probs32, two, strict=True)]
        )
        hits = np.array([float(int(y[i]) in two[i]) for i in rows])
    else:
        top = [int(np.argpartition(p, -1)[-1]) for p in probs32]
        scores = np.array([probs32[i, top[i]] for i in rows])
        hits = np.array([float(top[i] == y[i]) for i in rows])
    assert scores.dtype == np.float32
    order = _numpy1_argsort(scores)
    total, worst, count = np.float32(0.0), 0.0, 0.0
    for j in order:
        total = np.float32(total + scores[j])
        count += hits[j]
        worst = max(worst, abs(float(total / np.float32(len(y))) - count / len(y)))
    return worst


def test_recalibrate_py_ks_error_is_plot_ks_graphs_in_float32():
    """The pack's metric is Gupta's KS on float32 probabilities, step by step; it moves
    from calbench's float64 KS where the float32 running sum drifts, and equals it where
    every partial sum is exact in float32."""
    from calbench.papers.gupta2021.ks_float32 import recalibrate_py_ks_error
    from calbench.papers.gupta2021.recalibrate import scipy_2020_softmax

    rng = np.random.default_rng(3)
    logits, y = _confident_logits(rng, 4000)
    p32 = scipy_2020_softmax(logits).astype(np.float32)
    p = p32.astype(np.float64)
    p = p / p.sum(axis=1, keepdims=True)  # as the Keras twins store theirs
    for within, kwargs in [(False, {}), (True, {"mode": "within_top", "r": 2})]:
        ours = recalibrate_py_ks_error(p, y, **kwargs)
        assert ours == pytest.approx(_plot_ks_graphs_float32(p32, y, within), abs=1e-7)
        assert abs(ours - metrics.ks_error(p, y, **kwargs)) > 1e-6  # the float32 drift
    # exact partial sums (multiples of 1/8, N = 8): the float64 KS
    q = np.array([[0.875, 0.125], [0.75, 0.25], [0.5, 0.5], [0.625, 0.375]] * 2)
    labels = np.array([0, 1, 0, 0, 0, 0, 1, 1])
    assert recalibrate_py_ks_error(q, labels) == metrics.ks_error(q, labels)
