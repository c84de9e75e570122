"""KS calibration error (Gupta et al.) against a plain loop and hand examples."""

import numpy as np
import pytest

from calbench import metrics
from calbench.data.synthetic import sample_labels


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
