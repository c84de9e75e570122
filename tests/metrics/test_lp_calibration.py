"""Berta et al.'s variational Lp calibration error and its over-/under-confidence split,
against probmetrics 1.3.0 (a test reference only) and hand-worked cases."""

import functools
import warnings

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.metrics import lp_calibration_error, overconfidence_error, underconfidence_error
from calbench.metrics.refinement import temperature_scaled_on_itself

INF = float("inf")


def _task(n, k, sharpen, seed):
    """Labels drawn from softmax(z) and predictions softmax(sharpen * z): over-confident
    for sharpen > 1, under-confident below."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    truth = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    p = np.exp(z * sharpen) / np.exp(z * sharpen).sum(axis=1, keepdims=True)
    return p, y


def _probmetrics(metrics, p, y):
    """probmetrics' ``calib-err`` of each of ``metrics``, in order, under its ts-mix
    calibrator fitted on all the data (one fit for all of them)."""
    torch = pytest.importorskip("torch")
    pm = pytest.importorskip("probmetrics.metrics")
    from probmetrics.calibrators import get_calibrator
    from probmetrics.splitters import AllSplitter

    split = pm.MetricsWithCalibration(
        pm.CombinedMetrics(metrics),
        get_calibrator("temp-scaling", calibrate_with_mixture=True),
        val_splitter=AllSplitter(),
        cal_name="ts-mix",
        random_state=0,
    )
    with warnings.catch_warnings():  # its clipping warns about two-column inputs
        warnings.simplefilter("ignore")
        out = split.compute_all_from_labels_probs(torch.as_tensor(y), torch.as_tensor(p))
    return [float(out[f"calib-err_{m.get_names()[0]}_ts-mix_all"]) for m in metrics]


TASKS = [(1500, 5, 1.6, 1), (1500, 5, 0.6, 2), (1500, 10, 1.0, 3)]
BINARY = [(1500, 2, 2.0, 0), (1500, 2, 0.5, 4)]
ORDERS = (1, 2, INF)


@functools.cache
def _reference(task):
    """probmetrics' values on ``task``, from one fit: proper-L{p} on class 1 alone
    (``column``) and on both columns (``both``), and top-class under- and over-confidence."""
    pm = pytest.importorskip("probmetrics.metrics")
    probs, y = _task(*task)
    metrics = [pm.ProperLpLoss(p=p) for p in ORDERS]
    metrics += [pm.ProperLpLoss(p=p, binary_as_multiclass=True) for p in ORDERS]
    metrics += [
        pm.TopClassLoss(kind(pm.ProperLpLoss(p=1)))
        for kind in (pm.UnderConfidenceLoss, pm.OverConfidenceLoss)
    ]
    values = _probmetrics(metrics, probs, y)
    return {"column": values[:3], "both": values[3:6], "under": values[6], "over": values[7]}


@pytest.mark.parametrize("task", TASKS)
def test_multiclass_lp_error_equals_probmetrics(task):
    probs, y = _task(*task)
    for p, reference in zip(ORDERS, _reference(task)["column"], strict=True):
        ours = lp_calibration_error(probs, y, p=p)
        assert ours == pytest.approx(reference, rel=1e-5, abs=1e-8), p


@pytest.mark.parametrize("task", BINARY)
def test_binary_lp_error_equals_probmetrics(task):
    """Class 1's column alone (probmetrics' default) for p = 1, where its unsliced centre
    does not matter (module docstring); both columns for every p."""
    probs, y = _task(*task)
    reference = _reference(task)
    assert lp_calibration_error(probs, y, p=1) == pytest.approx(
        reference["column"][0], rel=1e-5, abs=1e-8
    )
    for p, both in zip(ORDERS, reference["both"], strict=True):
        ours = lp_calibration_error(probs, y, p=p, binary_as_multiclass=True)
        assert ours == pytest.approx(both, rel=1e-5, abs=1e-8), p


@pytest.mark.parametrize("task", BINARY + TASKS)
def test_over_and_under_confidence_equal_probmetrics(task):
    """Under-confidence equals probmetrics everywhere; over-confidence where the clipped
    recalibration stays on f's side of 1 - f, and otherwise by exactly the term its
    unsliced centre (1 - f, f) adds (module docstring), written out here."""
    probs, y = _task(*task)
    reference = _reference(task)
    assert underconfidence_error(probs, y) == pytest.approx(reference["under"], rel=1e-5, abs=1e-8)
    rows, top = np.arange(len(y)), probs.argmax(axis=1)
    f, g = probs[rows, top], temperature_scaled_on_itself(probs, y)[rows, top]
    clipped = np.where(f > 0.5, np.minimum(g, f), np.maximum(g, f))
    broadcast = (np.sign(clipped + f - 1) - np.sign(2 * f - 1)) * ((y == top) - (1 - f))
    assert overconfidence_error(probs, y) + broadcast.mean() == pytest.approx(
        reference["over"], rel=1e-5, abs=1e-8
    )
    if probs.shape[1] == 2:  # temperature scaling never moves a binary top class past 1/2
        assert not broadcast.any()


def _three_groups(accuracy):
    """Each row (0.6, 0.2, 0.2) with its top class cycling; exactly ``accuracy`` of each
    group labelled with its top class and the rest split evenly between the other two."""
    n_per, rows, labels = 100, [], []
    for top in range(3):
        others = [c for c in range(3) if c != top]
        hits = round(accuracy * n_per)
        miss = (n_per - hits) // 2
        rows += [np.roll([0.6, 0.2, 0.2], top)] * n_per
        labels += [top] * hits + [others[0]] * miss + [others[1]] * miss
    return np.array(rows), np.array(labels)


def test_closed_forms_on_a_three_group_predictor():
    """Accuracy 0.8 at confidence 0.6 (the others 0.1 at 0.2): temperature scaling
    sharpens, d = (a, -a/2, -a/2), so E<w, y - f> with E[y - f] = (0.2, -0.1, -0.1) is
    0.2 + 0.1 + 0.1 for p = 1, (0.4 + 0.2) / sqrt(6) for p = 2 and 0.2 for p = inf; all
    of the top-class error is under-confidence (0.8 - 0.6), none over."""
    probs, y = _three_groups(0.8)
    assert lp_calibration_error(probs, y, p=1) == pytest.approx(0.4, abs=1e-12)
    assert lp_calibration_error(probs, y, p=2) == pytest.approx(0.6 / np.sqrt(6), abs=1e-12)
    assert lp_calibration_error(probs, y, p=INF) == pytest.approx(0.2, abs=1e-12)
    assert underconfidence_error(probs, y) == pytest.approx(0.2, abs=1e-12)
    assert overconfidence_error(probs, y) == 0.0


def test_a_calibrated_predictor_scores_zero():
    """Frequencies equal to the predictions: E[y - f] = 0 in every group, so whatever
    direction the (tiny) uniform mixture moves g, every error is 0 up to rounding."""
    probs, y = _three_groups(0.6)
    for p in (1, 2, INF):
        assert lp_calibration_error(probs, y, p=p) == pytest.approx(0.0, abs=1e-12)
    assert overconfidence_error(probs, y) == pytest.approx(0.0, abs=1e-12)
    assert underconfidence_error(probs, y) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("p", [0.5, "two", float("nan")])
def test_an_order_below_one_is_refused(p):
    probs, y = _three_groups(0.8)
    with pytest.raises(CalbenchError, match="'p' parameter of lp_calibration_error"):
        lp_calibration_error(probs, y, p=p)
