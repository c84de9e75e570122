"""Kumar et al.'s debiased L2 calibration error against their package and a hand count."""

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.metrics import METRICS, evaluate
from calbench.metrics.debiased import debiased_ece
from calbench.simplex import softmax


def _task(k, n, seed):
    rng = np.random.default_rng(seed)
    z = 2.0 * rng.standard_normal((n, k))
    truth = softmax(z)
    y = (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(max=k - 1)
    return softmax(1.5 * z), y


@pytest.mark.parametrize("k,n", [(2, 300), (10, 2000), (5, 57), (3, 40)])
@pytest.mark.parametrize("mode,theirs", [("top", "top-label"), ("classwise", "marginal")])
def test_equals_their_package(k, n, mode, theirs):
    calibration = pytest.importorskip("calibration")
    probs, y = _task(k, n, seed=k * n)
    expected = calibration.lower_bound_scaling_ce(probs, y, p=2, debias=True, mode=theirs)
    assert debiased_ece(probs, y, mode=mode) == pytest.approx(expected, abs=1e-14)


def test_by_hand_on_four_points_in_two_bins():
    """Scores 0.2, 0.3 | 0.8, 0.9 (cut at 0.55); outcomes 0, 1 | 1, 1. Bin 1: (0.25 - 0.5)^2
    - 0.25 / 1 = -0.1875; bin 2: (0.85 - 1)^2 - 0 = 0.0225; half each: -0.0825 -> 0. With
    outcomes 0, 0 | 1, 1: 0.0625 and 0.0225, so sqrt(0.0425)."""
    probs = np.array([[0.8, 0.2], [0.7, 0.3], [0.2, 0.8], [0.1, 0.9]])
    from calbench.metrics.debiased import debiased_squared_error

    scores = probs[:, 1]
    assert debiased_squared_error(scores, np.array([0.0, 1, 1, 1]), 2) == pytest.approx(-0.0825)
    assert debiased_squared_error(scores, np.array([0.0, 0, 1, 1]), 2) == pytest.approx(0.0425)
    # Top-label: confidences 0.8, 0.7, 0.8, 0.9, all correct; sorted 0.7, 0.8 | 0.8, 0.9, so
    # the cut is 0.8 and a score equal to it falls below: bins {0.7, 0.8, 0.8} and {0.9}
    # (one point: 0). 3/4 (0.7667 - 1)^2 = 0.040833.
    top = debiased_ece(probs, np.array([0, 0, 1, 1]), n_bins=2, mode="top")
    assert top == pytest.approx(np.sqrt(0.75 * (1 - 2.3 / 3) ** 2))


def test_unbiased_for_the_squared_error_of_a_calibrated_model():
    """A calibrated binary model: the plug-in squared ECE is biased upwards by about
    bins / n; the debiased one averages near 0 (its root is floored, so test the square)."""
    from calbench.metrics.debiased import debiased_squared_error

    rng = np.random.default_rng(3)
    values = []
    for _ in range(400):
        scores = rng.random(200)
        values.append(debiased_squared_error(scores, (rng.random(200) < scores) * 1.0, 15))
    assert abs(np.mean(values)) < 3 * np.std(values) / np.sqrt(len(values))


def test_registered_and_checked():
    assert METRICS["debiased_ece"].range == (0.0, 1.0)
    probs, y = _task(3, 100, 0)
    assert evaluate({"debiased_ece": {}}, probs, y=y)["debiased_ece"] == debiased_ece(probs, y)
    with pytest.raises(CalbenchError, match="mode"):
        debiased_ece(probs, y, mode="marginal")
