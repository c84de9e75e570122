"""KS calibration error (Gupta et al.) against a plain loop and hand examples."""

import numpy as np
import pytest

from calbench import metrics
from calbench.data.synthetic import sample_labels
from tests.calibrators.test_spline import _numpy1_argsort


def _ks_loop(scores, outcomes):
    pairs = sorted(zip(scores, outcomes, strict=True), key=lambda t: t[0])
    n, gap, cs, co = len(pairs), 0.0, 0.0, 0.0
    for s, o in pairs:
        cs, co = cs + s / n, co + o / n
        gap = max(gap, abs(cs - co))
    return gap


def test_top1_hand_example():
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.7, 0.3]])
    y = np.array([0, 1, 0, 1])
    # sorted confidences .6 .7 .8 .9 with correctness 1 0 0 1: cumulative gaps
    # (.6-1)/4, (1.3-1)/4, (2.1-1)/4, (3.0-2)/4 -> max |.| = 1.1 / 4
    assert metrics.ks_error(p, y) == pytest.approx(1.1 / 4)


@pytest.mark.parametrize("mode,r", [("top", 1), ("top", 2), ("within_top", 2), ("class", 3)])
def test_matches_loop(rng, mode, r):
    p = rng.dirichlet([0.4] * 5, 800)
    y = sample_labels(p, rng)
    order = np.argsort(-p, axis=1, kind="stable")
    if mode == "top":
        cls = order[:, r - 1]
        scores, outcomes = p[np.arange(800), cls], cls == y
    elif mode == "within_top":
        scores = np.sort(p, axis=1)[:, ::-1][:, :r].sum(axis=1)
        outcomes = (order[:, :r] == y[:, None]).any(axis=1)
    else:
        scores, outcomes = p[:, r], y == r
    assert metrics.ks_error(p, y, mode=mode, r=r) == pytest.approx(
        _ks_loop(scores, outcomes.astype(float)), abs=1e-12
    )


def test_calibrated_predictions_have_small_ks_and_overconfident_large(synthetic):
    c = synthetic.true_map(synthetic.probs_test)
    assert metrics.ks_error(c, synthetic.y_test) < 0.01
    assert metrics.ks_error(synthetic.probs_test, synthetic.y_test) > 0.05


def test_equal_scores_run_in_gupta_codes_numpy1_order():
    """Gupta's KS (cal_metrics/KS.py: ``scores.argsort()``, then the cumulative score and
    label curves) under numpy 1.x: its introsort, which numpy 2 still runs for int16, so
    the written-out reference sorts the scores' dense ranks as int16. Float32-like scores
    in three long runs of ties, where the order inside a run moves the largest gap."""
    rng = np.random.default_rng(11)
    confidence = rng.choice([0.6, 0.75, 0.9], 3000)
    correct = rng.random(3000) < confidence  # calibrated: the largest gap lies inside a run
    p = np.column_stack([confidence, 1 - confidence])
    y = np.where(correct, 0, 1)
    order = _numpy1_argsort(confidence)
    gupta = np.abs(np.cumsum(confidence[order]) - np.cumsum(correct[order])).max() / 3000
    assert metrics.ks_error(p, y) == pytest.approx(gupta, rel=1e-12)
    stable = np.argsort(confidence, kind="stable")
    in_sample_order = np.abs(np.cumsum(confidence[stable]) - np.cumsum(correct[stable])).max()
    assert abs(in_sample_order / 3000 - gupta) > 1e-4  # the order inside the runs matters


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kuiper_error_equals_probmetrics_on_binary_scores(seed):
    """Against probmetrics' KuiperCalibrationMetric (CalArena's binary metric), on scores
    without ties (inside a run of ties the curves depend on its order)."""
    import torch
    from probmetrics.metrics import KuiperCalibrationMetric

    rng = np.random.default_rng(seed)
    p1 = rng.uniform(0.01, 0.99, 3000)
    y = (rng.random(3000) < np.clip(p1 + 0.1 * np.sin(6 * p1), 0, 1)).astype(int)
    probs = np.column_stack([1 - p1, p1])
    reference = KuiperCalibrationMetric().compute_from_labels_probs(
        torch.as_tensor(y), torch.as_tensor(probs, dtype=torch.float64)
    )
    assert metrics.kuiper_error(probs, y) == pytest.approx(float(reference), abs=1e-6)


def test_kuiper_error_in_calarenas_arithmetic_equals_probmetrics_on_tied_scores():
    """Binned scores tie in runs, where the order of the outcomes inside a run moves the
    curves: ``arithmetic="calarena"`` orders them as probmetrics does (float32, torch's
    sort) and gives its number; numpy 1.x's order gives another."""
    import torch
    from probmetrics.metrics import KuiperCalibrationMetric

    rng = np.random.default_rng(3)
    p1 = np.round(rng.uniform(0.01, 0.99, 3000) * 8) / 8 * 0.98 + 0.01  # 9 tied levels
    y = (rng.random(3000) < p1).astype(int)
    probs = np.column_stack([1 - p1, p1]).astype(np.float32)
    reference = KuiperCalibrationMetric().compute_from_labels_probs(
        torch.as_tensor(y), torch.as_tensor(probs)
    )
    ours = metrics.kuiper_error(probs.astype(np.float64), y, arithmetic="calarena")
    assert ours == pytest.approx(float(reference), abs=1e-7)
    assert metrics.kuiper_error(probs.astype(np.float64), y) != pytest.approx(ours, abs=1e-7)


def test_kuiper_error_adds_the_gaps_in_both_directions():
    """Hand-worked: scores 0.2, 0.4, 0.6, 0.8 (one per row, sorted) with outcomes 1, 0, 0, 1:
    outcome minus score cumulated over 4 rows is 0.2, 0.1, -0.05, 0.0; the largest gap above
    0.2, below 0.05: Kuiper 0.25, where KS takes the larger alone (0.2)."""
    p1 = np.array([0.2, 0.4, 0.6, 0.8])
    probs = np.column_stack([1 - p1, p1])
    y = np.array([1, 0, 0, 1])
    assert metrics.kuiper_error(probs, y) == pytest.approx(0.25)
    assert metrics.ks_error(probs, y, mode="class", r=1) == pytest.approx(0.2)
