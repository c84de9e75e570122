"""The metric_truth study: its population values against closed forms, its summaries against
counts by hand, and calbench's bootstrap interval's coverage where it is known to hold."""

import numpy as np
import pandas as pd
import pytest

from calbench.results.predictions import FoldPredictions
from calbench.simplex import softmax
from calbench.stats.bootstrap import bootstrap_cell, interval
from calbench.studies import metric_truth as study
from calbench.studies.metric_truth_report import accuracy, coverage, ordering, write_study
from calbench.studies.truth_tasks import TruthTask, binary_tce, population_errors


@pytest.mark.parametrize("model", ["over-confident", "under-confident"])
def test_binary_population_value_equals_the_closed_form(model):
    """Two classes: the sample's top-label error within 1e-3 of the one-dimensional
    integral; the confidence's gap has one sign, so the KS and Kuiper curves rise or fall
    throughout and both equal the L1 error; the classwise error of two classes is the same
    error binned on class 1's probability."""
    task = TruthTask(2, model)
    logits, q, _ = task.draw(200_000, np.random.default_rng(1))
    errors = population_errors(softmax(logits), q)
    assert errors["tce"] == pytest.approx(binary_tce(task), abs=1e-3)
    for other in ("ks", "kuiper"):
        assert errors[other] == pytest.approx(errors["tce"], abs=1e-12)
    assert errors["cwce"] == pytest.approx(errors["tce"], abs=1e-4)  # its own bins
    assert errors["tce2"] > errors["tce"]  # L2 above L1 where the gap varies


@pytest.mark.parametrize("k", [2, 10])
def test_a_calibrated_model_has_population_errors_of_zero(k):
    task = TruthTask(k, "calibrated")
    logits, q, _ = task.draw(50_000, np.random.default_rng(2))
    errors = population_errors(softmax(logits), q)
    assert max(errors[name] for name in ("tce", "tce2", "cwce", "ks", "kuiper")) < 1e-12
    assert binary_tce(TruthTask(2, "calibrated")) == 0.0


def test_labels_follow_the_true_probabilities():
    task = TruthTask(10, "over-confident")
    logits, q, y = task.draw(100_000, np.random.default_rng(3))
    assert np.abs(np.bincount(y, minlength=10) / len(y) - q.mean(axis=0)).max() < 0.005
    assert (logits.argmax(axis=1) == q.argmax(axis=1)).all()  # a temperature keeps the order


def test_percentile_interval_of_accuracy_covers_its_truth():
    """A mean of per-sample terms: calbench's 95% percentile interval of accuracy holds the
    expected accuracy E[q_top] (known) on close to 95% of 200 test sets of 300 rows; the
    share lies within a binomial band of 95%."""
    task = TruthTask(10, "calibrated")
    rng = np.random.default_rng(4)
    logits, q, _ = task.draw(400_000, rng)
    truth = q[np.arange(len(q)), logits.argmax(axis=1)].mean()
    held = []
    for draw in range(200):
        logits, _, y = task.draw(300, rng)
        probs = softmax(logits)
        fold = FoldPredictions(0, y, probs, probs, loss=np.zeros(0))
        boot = bootstrap_cell([fold], {"accuracy": {}}, n_resamples=400, seed=draw)
        low, high = interval(boot.replicates["accuracy"], boot.estimate["accuracy"])
        held.append(low <= truth <= high)
    assert 0.90 <= np.mean(held) <= 0.99, np.mean(held)


def _rows():
    """Two calibrators on two test sets; truths 0.10 and 0.20, one estimator."""
    base = {"classes": 2, "model": "m", "rows": 100, "estimator": "ece_15_width"}
    rows = [
        {**base, "calibrator": "a", "draw": 0, "estimate": 0.12, "truth": 0.10},
        {**base, "calibrator": "b", "draw": 0, "estimate": 0.25, "truth": 0.20},
        {**base, "calibrator": "a", "draw": 1, "estimate": 0.22, "truth": 0.10},
        {**base, "calibrator": "b", "draw": 1, "estimate": 0.21, "truth": 0.20},
    ]
    frame = pd.DataFrame(rows)
    frame["percentile_low"] = [0.11, 0.15, 0.05, 0.21]
    frame["percentile_high"] = [0.13, 0.3, 0.3, 0.25]
    frame["recentred_low"] = frame["percentile_low"] - 0.05
    frame["recentred_high"] = frame["percentile_high"]
    frame["sun_low"], frame["sun_high"] = np.nan, np.nan  # drawn for l2_ece_sun only
    return frame


def test_summaries_by_hand():
    rows = _rows()
    acc = accuracy(rows).iloc[0]
    errors = np.array([0.02, 0.05, 0.12, 0.01])
    assert acc["bias"] == pytest.approx(errors.mean())
    assert acc["rmse"] == pytest.approx(np.sqrt((errors**2).mean()))
    # Within calibrator a: 0.12, 0.22 (variance 0.005); b: 0.25, 0.21 (0.0008).
    assert acc["sd"] == pytest.approx(np.sqrt((0.005 + 0.0008) / 2))
    cov = coverage(rows).iloc[0]
    assert cov["percentile"] == pytest.approx(0.5)  # rows 2 and 3 hold the truth
    assert cov["recentred"] == pytest.approx(1.0)
    assert np.isnan(cov["sun"])
    order = ordering(rows).iloc[0]
    assert (order["agreement"], order["pairs"]) == (0.5, 2)  # right on draw 0, wrong on 1


def test_quick_study_writes_its_tables_and_figure(tmp_path):
    size = study.StudySize(
        classes=(2,), draws=((200, 3),), calibration_rows=500, population_rows=20_000, resamples=50
    )
    rows = study.run_study(size, seed=0)
    assert len(rows) == 3 * len(study.CALIBRATORS) * 3 * len(study.ESTIMATORS)
    truths = rows.groupby(["model", "calibrator", "estimator"])["truth"].nunique()
    assert (truths == 1).all()  # a calibrator's truth does not move with the test set
    with_bounds = rows.dropna(subset=["percentile_low"])["estimator"].unique()
    assert sorted(with_bounds) == sorted(study.WITH_INTERVALS)
    paths = write_study(rows, tmp_path, "calbench metric-truth --size test")
    text = (tmp_path / "metric_truth.md").read_text()
    assert "## Findings" in text and "ece_15_width" in text and "orders" in text
    assert {p.name for p in paths} >= {"metric_truth.png", "accuracy.csv", "ordering.csv"}
