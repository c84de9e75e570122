"""Valk's KNN calibration as his code runs it (`calbench.papers.valk2022.reference_knn`) against
his procedure written out here as his code is written (msc-knn-cal
helpers/weighting_calibrators.py): float32 distances, argpartition, k chosen by
KFold(10, shuffle, random_state=0) on scikit-learn's log-loss as it was then."""

import numpy as np
import pytest
from sklearn.model_selection import KFold

from calbench.calibrators import make_calibrator
from calbench.papers.valk2022.reference_knn import ValkNeighbours
from tests.papers.valk2022.test_reference_forest import (
    _sklearn_log_loss,
    _softmax,
    _valk_temperature,
)

#: Valk's KNN for contract tests on small sets (his k grid reaches 4096 neighbours).
SMALL_KNN = {"ks": (2, 4), "n_cv_folds": 3}


def _kl(x_test, x_train):
    return np.sum(x_test[:, None] * np.log(x_test[:, None] / x_train), axis=2)


def _minkowski_dist(x_test, x_train, p=2):
    return (np.abs(x_test[:, None] - x_train) ** p).sum(axis=2) ** (1 / p)


def _numpy1_argpartition(distances, k):
    """np.argpartition as numpy 1.19 ran it on floats: numpy's classic introselect, which
    numpy 2 still runs on int16 (its SIMD selection covers 32- and 64-bit types), on each
    row's dense ranks, NaN ranked last and equal to NaN as numpy's float comparison has it:
    the same comparisons, so the same swaps."""
    ranks = [np.unique(row, return_inverse=True)[1].astype(np.int16) for row in distances]
    return np.array([np.argpartition(r, k) for r in ranks])


def _k_closest_uniform(distances, k):
    k_closest_ids = _numpy1_argpartition(distances, k)[:, :k]
    weights = np.zeros(distances.shape)
    np.put_along_axis(weights, k_closest_ids, 1 / k, axis=1)
    return weights


def _force_p_to_simplex(p, crop=0):
    p[p < 0] = crop
    p[p > 1] = 1 - crop
    return p / np.sum(p, axis=1, keepdims=True)


def _calibrate_preds_with_weighting(x_train, x_test, p_train, p_test, y_train, weights_fun, crop):
    ce_estimates = np.zeros(x_test.shape)
    p_diff_y_train = p_train - y_train
    for x_idx in range(0, len(x_test), 300):  # his batch_size
        batch_weights = weights_fun(x_test[x_idx : x_idx + 300], x_train)
        ce_estimates[x_idx : x_idx + 300] = np.dot(batch_weights, p_diff_y_train)
    return _force_p_to_simplex(p_test - ce_estimates, crop=crop)


def _find_weighting_fun_with_cv(x, y, weighting_funs, crop, n_folds):
    scores = []
    for w_fun in weighting_funs:
        cv_scores = []
        for train_index, test_index in KFold(n_folds, shuffle=True, random_state=0).split(x):
            try:
                cal = _calibrate_preds_with_weighting(
                    x[train_index], x[test_index], x[train_index], x[test_index],
                    y[train_index], w_fun, crop,
                )  # fmt: skip
                cv_scores.append(_sklearn_log_loss(y[test_index], cal))
            except ValueError:  # his bare except: a k the fold cannot hold
                cv_scores.append(99999)
        scores.append(np.mean(cv_scores))
    return scores


@pytest.mark.parametrize("metric,temperature", [("kl", False), ("euclidean", True)])
def test_the_neighbours_follow_valks_code(metric, temperature):
    rng = np.random.default_rng(7)
    n_classes = 10
    # Spread wide enough that his whole-array float32 softmax underflows to exact zeros:
    # infinite KL distances to some calibration points, NaN rows for some test points.
    logits = (rng.normal(size=(700, n_classes)) * 25).astype(np.float32).astype(np.float64)
    y = rng.integers(0, n_classes, 700)
    train, test = slice(0, 400), slice(400, None)
    ks = (8, 16, 64, 400)
    calibrator = ValkNeighbours(metric=metric, ks=ks, n_cv_folds=4, temperature=temperature)
    ours = calibrator.fit(logits[train], y[train]).predict_proba(logits[test])

    l_train, l_test = (logits[part].astype(np.float32) for part in (train, test))
    if temperature:
        temp = _valk_temperature(l_train, y[train])
        assert calibrator.temperature_ == temp
        l_train, l_test = l_train / np.float32(temp), l_test / np.float32(temp)
    p_train, p_test = _softmax(l_train), _softmax(l_test)
    if metric == "kl":
        assert (p_train == 0).any() and (p_test == 0).any()
    distance = _kl if metric == "kl" else _minkowski_dist
    funs = [lambda te, tr, k=k: _k_closest_uniform(distance(te, tr), k) for k in ks]
    y_onehot = np.eye(n_classes)[y]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scores = _find_weighting_fun_with_cv(p_train, y_onehot[train], funs, 1e-4, 4)
        best = int(np.argmin(scores))
        theirs = _calibrate_preds_with_weighting(
            p_train, p_test, p_train, p_test, y_onehot[train], funs[best], 1e-4
        )
    assert scores[-1] == 99999  # k = 400 > a fold's 300 points: his except
    np.testing.assert_array_equal(calibrator.k_scores_, scores)
    assert calibrator.n_neighbors_ == ks[best]
    np.testing.assert_array_equal(ours, theirs)


def test_valks_knn_methods_carry_his_settings():
    kl = make_calibrator("knn_kl_valk_code")
    euc = make_calibrator("ts_knn_euc_valk_code")
    assert (kl.metric, kl.temperature, kl.n_cv_folds) == ("kl", False, 10)
    assert (euc.metric, euc.temperature) == ("euclidean", True)
    assert kl.ks == (32, 64, 128, 256, 512, 1024, 2048, 4096)


@pytest.mark.slow  # 20-30 s: two KNN fits with 10-fold CV on the published file
def test_valks_knn_confidence_ece_on_densenet40_needs_his_order_of_ties(published_logits):
    """Table 4's KNN_kl (3.342) and Table 11's TS+KNN_euc (0.72) confidence-ECE on Kull et
    al.'s DenseNet-40 CIFAR-10 file, from his code's KNN: thousands of test confidences
    equal the clipped top value and straddle equal-size cuts, so the number needs the
    order his np.argsort (numpy 1.19) gave them; a stable sort gives 3.354 and 0.708."""
    from calbench.metrics import confidence_ece
    from tests.conftest import load_network

    data = load_network("c10_densenet40", published_logits)
    for method, printed, in_sample_order in [
        ("knn_kl_valk_code", 3.342, 3.354),
        ("ts_knn_euc_valk_code", 0.720, 0.708),
    ]:
        probs = (
            make_calibrator(method).fit(data.logits_cal, data.y_cal).predict_proba(data.logits_test)
        )
        ece = 100 * confidence_ece(probs, data.y_test, 15, "equal_size")
        stable = 100 * confidence_ece(probs, data.y_test, 15, "equal_size_stable")
        assert round(ece, 3) == pytest.approx(printed), method
        assert round(stable, 3) == pytest.approx(in_sample_order), method
