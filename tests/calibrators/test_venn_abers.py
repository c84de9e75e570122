"""Venn-Abers predictors against the venn-abers package (Manokhin), the reference the
field uses, and against isotonic regression refitted with the test point added."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.isotonic import IsotonicRegression
from venn_abers import VennAbers, VennAbersCV
from venn_abers.venn_abers import predict_proba_prefitted_va

from calbench.calibrators import make_calibrator
from calbench.calibrators.venn_abers.predictors import venn_abers_pair, venn_abers_tables
from calbench.simplex import softmax


def _data(n, k, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    truth = softmax(0.7 * z)
    y = (truth.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return z, y


def test_tables_are_isotonic_regression_with_the_test_point_added():
    """p0 / p1 by definition: isotonic regression refitted on the calibration data plus
    (s, 0) / (s, 1), read at s; scores rounded to 2 decimals so that ties occur."""
    rng = np.random.default_rng(0)
    scores = np.round(rng.uniform(size=60), 2)
    labels = rng.uniform(size=60) < scores
    tests = np.round(rng.uniform(size=40), 2)
    p0, p1 = venn_abers_pair(venn_abers_tables(scores, labels), tests)
    for s, q0, q1 in zip(tests, p0, p1, strict=True):
        for label, value in ((0.0, q0), (1.0, q1)):
            iso = IsotonicRegression().fit(np.append(scores, s), np.append(labels, label))
            assert iso.predict([s])[0] == pytest.approx(value, abs=1e-12)
    assert np.all(p0 <= p1)


def test_binary_tables_equal_the_package_with_ties():
    rng = np.random.default_rng(1)
    scores = np.round(rng.uniform(size=300), 2)
    labels = rng.uniform(size=300) < scores**2
    tests = np.round(rng.uniform(size=200), 2)
    _, expected = (
        VennAbers()
        .fit(np.column_stack([1 - scores, scores]), labels)
        .predict_proba(np.column_stack([1 - tests, tests]))
    )
    p0, p1 = venn_abers_pair(venn_abers_tables(scores, labels), tests)
    np.testing.assert_array_equal(p0, expected[:, 0])
    np.testing.assert_array_equal(p1, expected[:, 1])


@pytest.mark.parametrize("multiclass", ["one_vs_one", "one_vs_rest"])
def test_inductive_multiclass_equals_the_package(multiclass):
    z, y = _data(1000, 5, 2)
    test, _ = _data(500, 5, 3)
    expected, _ = predict_proba_prefitted_va(softmax(z), y, softmax(test), va_tpe=multiclass)
    ours = make_calibrator("venn_abers", multiclass=multiclass).fit(z, y).predict_proba(test)
    np.testing.assert_allclose(ours, expected, atol=1e-12)


class _FixedScore(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose probability is its one feature: the package's VennAbersCV then
    calibrates fixed scores per fold, as calbench's cross Venn-Abers does."""

    def fit(self, x, y):
        self.classes_ = np.array([False, True])
        return self

    def predict_proba(self, x):
        return np.column_stack([1 - x[:, 0], x[:, 0]])


@pytest.mark.parametrize("loss", ["log", "brier"])
def test_cross_venn_abers_equals_the_packages_cvap(loss):
    """Two classes: one binary problem, scored by z_1 - z_0; the package gets the same
    order as probabilities and the same stratified folds."""
    z, y = _data(800, 2, 4)
    test, _ = _data(300, 2, 5)
    scores = 1 / (1 + np.exp(-(z[:, 1] - z[:, 0])))
    package = VennAbersCV(_FixedScore(), inductive=False, n_splits=5, shuffle=True, random_state=7)
    package.fit(scores[:, None], (y == 1).reshape(-1, 1))
    test_scores = 1 / (1 + np.exp(-(test[:, 1] - test[:, 0])))
    expected = package.predict_proba(test_scores[:, None], loss=loss)
    model = make_calibrator("venn_abers", n_folds=5, loss=loss, random_state=7).fit(z, y)
    np.testing.assert_allclose(model.predict_proba(test), expected, atol=1e-12)


def test_venn_abers_calibrates_an_overconfident_classifier():
    z, y = _data(5000, 10, 6)
    test, y_test = _data(5000, 10, 7)
    probs = make_calibrator("venn_abers").fit(z, y).predict_proba(test)
    log_loss = -np.log(probs[np.arange(len(y_test)), y_test]).mean()
    uncalibrated = -np.log(softmax(test)[np.arange(len(y_test)), y_test]).mean()
    truth = -np.log(softmax(0.7 * test)[np.arange(len(y_test)), y_test]).mean()
    # Here 1.693 against 1.749 uncalibrated and 1.681 for the true map.
    assert log_loss < uncalibrated - 0.04
    assert log_loss < truth + 0.02


def test_cross_venn_abers_with_a_class_rarer_than_its_folds(recwarn):
    """A class with 3 samples and 5 folds: its pairs are split without stratifying, with
    no warning from scikit-learn, and every row still lies on the simplex."""
    z, y = _data(400, 6, 8)
    y[y == 5] = 0
    y[:3] = 5
    model = make_calibrator("venn_abers", n_folds=5)
    probs = model.fit(z, y).predict_proba(z)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    assert (probs > 0).all()
    assert not [w for w in recwarn if "n_splits" in str(w.message)]
