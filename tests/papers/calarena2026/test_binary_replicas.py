"""CalArena's binary replicas and its binary ECE against probmetrics' own code on the same
float32 inputs (probmetrics 1.3, CalArena's engine)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from calbench.calibrators import make_calibrator
from calbench.papers.calarena2026.ece import calarena_ece, in_float32
from calbench.simplex import probs_to_logits

pc = pytest.importorskip("probmetrics.calibrators")
Metrics = pytest.importorskip("probmetrics.metrics").Metrics


def _task(rng, n=1500):
    z = rng.normal(2.0, 3.0, n)
    p1 = (1 / (1 + np.exp(-z))).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(-0.7 * z - 0.3))).astype(int)
    return p1, y, probs_to_logits(np.column_stack([1 - p1, p1]).astype(np.float32))


def _probmetrics_ece(predictions, y) -> float:
    """CalArena's call: the method's predictions as a tensor of their own dtype."""
    ece = Metrics.from_names(["ece-15"]).compute_all_from_labels_probs(
        torch.tensor(np.asarray(y), dtype=torch.int64), torch.tensor(predictions)
    )
    return float(ece["ece-15"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_calarenas_binary_ece_is_probmetrics_own_on_bin_edges(rng, dtype):
    """Half the class-1 probabilities sit on the 15 bins' edges (as a binning map's do),
    where float32 and float64 edges and the clamp's renormalisation decide the bin."""
    edges = np.arange(16) / 15
    p1 = np.where(rng.random(3000) < 0.5, rng.choice(edges, 3000), rng.random(3000))
    y = (rng.random(3000) < p1).astype(int)
    predictions = np.column_stack([1 - p1, p1]).astype(dtype)
    assert in_float32(predictions) == (dtype == np.float32)
    ours = calarena_ece(predictions.astype(np.float64), y)
    assert ours == pytest.approx(_probmetrics_ece(predictions, y), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize(
    "method, kind", [("platt_logits_calarena", "affine"), ("quadratic_calarena", "quadratic")]
)
def test_logit_scaling_sklearn_is_probmetrics_fitted_in_float64(rng, monkeypatch, method, kind):
    """probmetrics' BinaryLogisticCalibrator with scikit-learn given its float32 features
    as float64 (this scikit-learn, 1.9, would fit them in float32)."""
    from sklearn.linear_model import LogisticRegression

    p1, y, logits = _task(rng)
    fit, predict = LogisticRegression.fit, LogisticRegression.predict_proba
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_float32 = pc.BinaryLogisticCalibrator(type=kind).fit(p1[:1000], y[:1000])
        in_float32 = in_float32.predict_proba(p1[1000:])
        monkeypatch.setattr(
            LogisticRegression, "fit", lambda m, x, t: fit(m, np.asarray(x, np.float64), t)
        )
        monkeypatch.setattr(
            LogisticRegression, "predict_proba", lambda m, x: predict(m, np.asarray(x, np.float64))
        )
        reference = pc.BinaryLogisticCalibrator(type=kind).fit(p1[:1000], y[:1000])
        expected = reference.predict_proba(p1[1000:])
        ours = make_calibrator(method).fit(logits[:1000], y[:1000])
    np.testing.assert_array_equal(ours.predict_proba(logits[1000:]), expected)
    assert not np.array_equal(expected, in_float32)
    # beyond two classes (the estimator contract) one fit per class, rows renormalised
    z = rng.normal(size=(300, 3))
    rows = make_calibrator(method).fit(z, z.argmax(1)).predict_proba(z)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-12)


def test_kernel_nw_float32_returns_probmetrics_float32_predictions(rng):
    p1, y, logits = _task(rng, 800)
    reference = pc.KernelCalibrator().fit(p1[:500], y[:500]).predict_proba(p1[500:])
    got = (
        make_calibrator("kernel_nw_float32").fit(logits[:500], y[:500]).predict_proba(logits[500:])
    )
    assert reference.dtype == np.float32 and in_float32(got)
    np.testing.assert_allclose(got, reference, atol=2e-6, rtol=0)


def test_venn_abers_binary_calarena_is_probmetrics_binary_venn_abers(rng):
    pytest.importorskip("venn_abers")
    p1, y, logits = _task(rng, 1200)
    reference = pc.BinaryVennAbersCalibrator().fit(p1[:800], y[:800]).predict_proba(p1[800:])
    model = make_calibrator("venn_abers_binary_calarena").fit(logits[:800], y[:800])
    np.testing.assert_array_equal(model.predict_proba(logits[800:]), reference)


def test_calarenas_ece_of_more_classes_is_probmetrics_top_label_ece(rng):
    probs = rng.dirichlet(np.ones(4) * 0.7, 2000)
    y = np.array([rng.choice(4, p=p) for p in probs])
    ours = calarena_ece(probs, y)
    assert ours == pytest.approx(_probmetrics_ece(probs, y), rel=1e-6, abs=1e-9)
