"""Valk's random calibration forest as his code runs it
(`calbench.papers.valk2022.reference_forest`) against his procedure written out here as his
code is written: recursive nodes drawing from numpy's global legacy generator, depth chosen
by KFold(10, shuffle, random_state=1)."""

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.model_selection import KFold

from calbench.calibrators import make_calibrator
from calbench.papers.valk2022.reference_forest import ValkRandomForest

#: Valk's forest small enough for contract tests (its defaults grow 30,000 trees a fit).
SMALL_FOREST = {"n_trees": 5, "depths": (1, 2, 3), "n_cv_folds": 3}


class _ValkNode:
    """msc-knn-cal's RandomSplitCalibrationNode (helpers/calibration_trees.py), calibration
    parts only. numpy 1.x compared a float32 column with the float64 threshold in float32:
    written out here as the explicit cast that numpy 2 no longer makes."""

    def __init__(self, p, y, depth_to_go):
        self.n_classes = p.shape[1]
        if depth_to_go <= 0 or len(p) == 1:
            self._become_leaf(p, y)
            return
        self.split_on_class = np.random.choice(np.arange(self.n_classes))  # noqa: NPY002 (his)
        column = p[:, self.split_on_class]
        self.split_at = np.random.uniform(column.min(), column.max(), size=1)[0]  # noqa: NPY002
        right = self.split_rule(p)
        if (~right).all() or right.all():
            self._become_leaf(p, y)
            return
        self.left_child = _ValkNode(p[~right], y[~right], depth_to_go - 1)
        self.right_child = _ValkNode(p[right], y[right], depth_to_go - 1)
        self.leaf = False

    def split_rule(self, x):
        return x[:, self.split_on_class] >= np.float32(self.split_at)

    def _become_leaf(self, p, y):
        self.leaf = True
        self.mean_p = np.mean(p, axis=0)
        self.mean_y = np.mean(y, axis=0)

    def means(self, p, which):
        if self.leaf:
            return getattr(self, which)
        output = np.zeros((len(p), self.n_classes))
        right = self.split_rule(p)
        output[~right] = self.left_child.means(p[~right], which)
        output[right] = self.right_child.means(p[right], which)
        return output


def _valk_forest(p, y, depth, n_trees, seed, p_to_calibrate, crop):
    np.random.seed(seed)  # noqa: NPY002 (his global generator)
    trees = [_ValkNode(p, y, depth) for _ in range(n_trees)]
    cal = np.zeros(p_to_calibrate.shape)
    for tree in trees:
        cal += p_to_calibrate - (
            tree.means(p_to_calibrate, "mean_p") - tree.means(p_to_calibrate, "mean_y")
        )
    cal = cal / len(trees)
    cal[cal < 0] = crop  # force_p_to_simplex
    cal[cal > 1] = 1 - crop
    return cal / np.repeat(np.sum(cal, axis=1), cal.shape[1]).reshape((-1, cal.shape[1]))


def _sklearn_log_loss(y_onehot, p):  # scikit-learn < 1.3: eps=1e-15, clip, renormalise
    p = np.clip(p, 1e-15, 1 - 1e-15)
    p /= p.sum(axis=1, keepdims=True)
    return -np.mean(np.sum(y_onehot * np.log(p), axis=1))


def _valk_procedure(p_train, y_train, p_test, depths, n_folds, n_trees, crop):
    scores = []
    for depth in depths:
        fold_scores = []
        for fit, held in KFold(n_folds, shuffle=True, random_state=1).split(p_train):
            c_hat = _valk_forest(p_train[fit], y_train[fit], depth, n_trees, 0, p_train[held], crop)
            fold_scores.append(_sklearn_log_loss(y_train[held], c_hat))
        scores.append(np.mean(fold_scores))
    best = depths[int(np.argmin(scores))]
    return _valk_forest(p_train, y_train, best, n_trees, 0, p_test, crop), scores, best


def _softmax(x):  # his helpers/temp_scaling.py softmax, on float32 logits
    e_x = np.exp(x - np.max(x))
    return e_x / e_x.sum(axis=1, keepdims=1)


def _valk_temperature(logits32, labels):
    """His TemperatureScaling.fit: BFGS from 1 on scikit-learn's log-loss (then: eps 1e-15)
    of softmax(logits / x), x a one-element float64 array."""
    y_onehot = np.eye(logits32.shape[1])[labels]
    result = minimize(
        lambda x: _sklearn_log_loss(y_onehot, _softmax(logits32 / x)),
        x0=1,
        options={"maxiter": 50},
        method="BFGS",
    )
    return result.x[0]


@pytest.mark.parametrize("n_classes,temperature", [(3, False), (10, False), (10, True)])
def test_the_forest_follows_valks_code_draw_for_draw(n_classes, temperature):
    rng = np.random.default_rng(n_classes)
    logits = (rng.normal(size=(700, n_classes)) * 3).astype(np.float32).astype(np.float64)
    y = rng.integers(0, n_classes, 700)
    train, test = slice(0, 400), slice(400, None)
    depths = (1, 2, 3, 5)
    calibrator = ValkRandomForest(
        n_trees=7, depths=depths, n_cv_folds=4, temperature=temperature
    ).fit(logits[train], y[train])
    ours = calibrator.predict_proba(logits[test])

    # his load_dataset: each part's softmax on its own (its own largest logit); with TS his
    # predict divides the float32 logits by the float64 temperature, in float32 (numpy 1.x)
    l_train, l_test = (logits[part].astype(np.float32) for part in (train, test))
    if temperature:
        temp = _valk_temperature(l_train, y[train])
        assert calibrator.temperature_ == temp and abs(temp - 1) > 0.1
        l_train, l_test = l_train / np.float32(temp), l_test / np.float32(temp)
    p_train, p_test = _softmax(l_train), _softmax(l_test)
    y_onehot = np.eye(n_classes)[y]
    theirs, scores, best = _valk_procedure(p_train, y_onehot[train], p_test, depths, 4, 7, 1e-4)
    assert calibrator.depth_ == best
    np.testing.assert_array_equal(calibrator.depth_scores_, scores)
    np.testing.assert_array_equal(ours, theirs)
    assert len(set(np.round(ours[:, 0], 12))) > 20  # the trees split: not one leaf


def test_valks_forest_is_registered_with_his_settings():
    model = make_calibrator("valk_forest")
    assert (model.n_trees, tuple(model.depths), model.n_cv_folds, model.seed) == (
        250,
        tuple(range(1, 13)),
        10,
        0,
    )
    assert not model.temperature


def _ts_problem():
    rng = np.random.default_rng(5)
    logits = (rng.normal(size=(600, 10)) * 4).astype(np.float32).astype(np.float64)
    y = np.where(rng.random(600) < 0.8, logits.argmax(axis=1), rng.integers(0, 10, 600))
    return logits, y


def _forward_difference(logits32, labels, t):
    """scipy 1.6's BFGS gradient estimate of his TS loss (absolute step 1.49e-8)."""
    y_onehot = np.eye(logits32.shape[1])[labels]

    def loss(x):
        return _sklearn_log_loss(y_onehot, _softmax(logits32 / np.array([x])))

    h = 1.4901161193847656e-08
    return (loss(t + h) - loss(t)) / h


def test_accepted_temperatures_are_where_his_gradient_estimate_meets_the_tolerance():
    from calbench.papers.valk2022.reference_valk import accepted_temperatures

    logits, y = _ts_problem()
    low, centre, high = accepted_temperatures(logits, y)
    l32 = logits.astype(np.float32)
    assert low < _valk_temperature(l32, y) < high
    # the estimate moves in steps of the loss's rounding over the step: a few 1e-9 here
    for t, level in ((low, -1e-5), (centre, 0.0), (high, 1e-5)):
        assert abs(_forward_difference(l32, y, t) - level) < 1e-7


def test_scipys_bfgs_accepts_every_temperature_inside_and_none_outside():
    """His stopping test, run by scipy itself: BFGS started inside the interval stops at
    once; started a little beyond either end, it iterates."""
    from calbench.papers.valk2022.reference_valk import accepted_temperature

    logits, y = _ts_problem()
    l32, y_onehot = logits.astype(np.float32), np.eye(10)[y]

    def iterations(x0):
        loss = lambda x: _sklearn_log_loss(y_onehot, _softmax(l32 / x))  # noqa: E731
        return minimize(loss, x0=x0, options={"maxiter": 50}, method="BFGS").nit

    centre = accepted_temperature(logits, y, 0.0)
    for stop in (-0.95, -0.5, 0.0, 0.5, 0.95):
        assert iterations(accepted_temperature(logits, y, stop)) == 0
    for end in (-1.0, 1.0):
        beyond = centre + 1.1 * (accepted_temperature(logits, y, end) - centre)
        assert iterations(beyond) > 0


def test_the_forest_at_a_ts_stop_is_his_forest_at_that_temperature():
    from calbench.papers.valk2022.reference_valk import accepted_temperature

    logits, y = _ts_problem()
    settings = {"n_trees": 5, "depths": (1, 3), "n_cv_folds": 3, "temperature": True}
    stopped = ValkRandomForest(ts_stop=0.5, **settings).fit(logits, y)
    assert stopped.temperature_ == accepted_temperature(logits, y, 0.5)
    # the same forest as at his BFGS's stop, once that stop is replaced by this temperature
    theirs = ValkRandomForest(**settings).fit(logits, y)
    assert theirs.temperature_ != stopped.temperature_
    theirs.temperature_ = stopped.temperature_
    p32 = _softmax(logits.astype(np.float32) / np.float32(stopped.temperature_))
    out, scores, best = _valk_procedure(p32, np.eye(10)[y], p32, (1, 3), 3, 5, 1e-4)
    assert stopped.depth_ == best
    np.testing.assert_array_equal(stopped.predict_proba(logits), out)


@pytest.mark.parametrize("params", [{"ts_stop": 0.5}, {"ts_stop": 1.5, "temperature": True}])
def test_a_ts_stop_needs_the_temperature_and_lies_in_the_interval(params):
    logits, y = _ts_problem()
    with pytest.raises(ValueError):
        ValkRandomForest(n_trees=2, depths=(1,), n_cv_folds=2, **params).fit(logits, y)


def test_the_depths14_twin_is_his_forest_with_the_grid_reaching_14():
    model = make_calibrator("forest_valk_depths14")
    assert tuple(model.depths) == tuple(range(1, 15))
    assert (model.n_trees, model.n_cv_folds, model.seed, model.temperature) == (250, 10, 0, False)


@pytest.mark.slow  # about a minute: 250 depth-14 trees grown and walked node by node
def test_valks_table4_forest_is_his_code_at_depth_14(published_logits):
    """Table 4's forest column on Kull et al.'s DenseNet-40 CIFAR-10 file (3.201 / 0.436 /
    0.120 / 0.292 / 0.924 / 0.011) is his RandomSplitCalibrationForest at depth 14, written
    out here as his code is written (the depth his CV picks from 1-14; his code's grid,
    1-12, picks 10: 3.663 / 0.475 / 0.1215 / 0.2963 / 0.9246 / 0.0129). Brier, log-loss
    and accuracy computed here as his generate_stats_df_from_results does; the ECEs with his
    equal-size bins (calbench's equal_size, his numpy 1.19 order of ties)."""
    from calbench.metrics import average_loss_gap, classwise_ece, confidence_ece
    from tests.conftest import load_network

    data = load_network("c10_densenet40", published_logits)
    p_cal = _softmax(data.logits_cal.astype(np.float32))  # his load_dataset, part by part
    p_test = _softmax(data.logits_test.astype(np.float32))
    y_cal, y_test = np.eye(10)[data.y_cal], np.eye(10)[data.y_test]
    probs = _valk_forest(p_cal, y_cal, 14, 250, 0, p_test, 1e-4)

    brier = np.mean(np.sum((probs - y_test) ** 2, axis=1))
    figures = {
        "confidence_ece": 100 * confidence_ece(probs, data.y_test, 15, "equal_size"),
        "classwise_ece": 100 * classwise_ece(probs, data.y_test, 15, "equal_size"),
        "brier": brier,
        "log_loss": _sklearn_log_loss(y_test, probs.copy()),
        "accuracy": np.mean(y_test.argmax(axis=1) == probs.argmax(axis=1)),
        "loss_gap": average_loss_gap(probs, data.y_test, n_losses=500, seed=0, draws="valk"),
    }
    printed = {
        "confidence_ece": 3.201,
        "classwise_ece": 0.436,
        "brier": 0.120,
        "log_loss": 0.292,
        "accuracy": 0.924,
        "loss_gap": 0.011,
    }
    assert {k: np.round(v, 3) for k, v in figures.items()} == pytest.approx(printed)
