"""Valk's non-parametric calibrators and the one-vs-rest maps against references."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators import make_calibrator, registered_calibrator
from calbench.calibrators.neighbourhood.kernel import crop
from calbench.errors import CalbenchError
from calbench.simplex import probs_to_logits, softmax
from tests.conftest import overconfident_logits


@pytest.fixture
def small(rng):
    p_cal = rng.dirichlet([0.7, 0.7, 0.7, 0.7], 300)
    y_cal = np.array([rng.choice(4, p=q) for q in p_cal])
    p_test = rng.dirichlet([0.7, 0.7, 0.7, 0.7], 50)
    return p_cal, y_cal, p_test


def _brute_force(p_cal, y_cal, p_test, weight_fn, epsilon, cropping="outside"):
    """Valk 3.3-3.4 written one test point at a time, straight from the formulas; cropped as
    Valk's code's force_p_to_simplex (only entries outside [0, 1] move) or, with
    ``cropping="clip"``, as his Algorithm 2 as printed."""
    errors = p_cal - np.eye(p_cal.shape[1])[y_cal]
    out = []
    for p in p_test:
        w = weight_fn(p)
        w = w / w.sum()
        q = p - (w[:, None] * errors).sum(axis=0)
        if cropping == "clip":
            q = np.minimum(np.maximum(q, epsilon), 1 - epsilon)
        else:
            q = q.copy()
            q[q < 0], q[q > 1] = epsilon, 1 - epsilon
        out.append(q / q.sum())
    return np.array(out)


def _knn_weights(p_cal, k, metric):
    def weights(p):
        if metric == "kl":
            d = np.array([np.sum(p * np.log(p / q)) for q in p_cal])
        else:
            d = np.array([np.linalg.norm(p - q) for q in p_cal])
        w = np.zeros(len(p_cal))
        w[np.argsort(d, kind="stable")[:k]] = 1.0
        return w

    return weights


@pytest.mark.parametrize("name,metric", [("knn_kl", "kl"), ("knn_euc", "euclidean")])
@pytest.mark.parametrize("k", [1, 7, 300])
def test_knn_matches_brute_force(small, name, metric, k):
    p_cal, y_cal, p_test = small
    cal = make_calibrator(name, n_neighbors=k).fit(probs_to_logits(p_cal), y_cal)
    ref = _brute_force(p_cal, y_cal, p_test, _knn_weights(p_cal, k, metric), 1e-4)
    np.testing.assert_allclose(cal.predict_proba(probs_to_logits(p_test)), ref, atol=1e-12)


def _dirichlet_weights(p_cal, h, alpha_from):
    """scipy's Dirichlet density, centred (alpha = p / h + 1) on the calibration point as
    Valk's code's dirichlet_log_kernel, or on the test point as the thesis' formula."""
    from scipy.stats import dirichlet

    def weights(p):
        if alpha_from == "calibration":
            log_w = np.array([dirichlet.logpdf(p, q / h + 1) for q in p_cal])
        else:
            log_w = np.array([dirichlet.logpdf(q, p / h + 1) for q in p_cal])
        return np.exp(log_w - log_w.max())

    return weights


@pytest.mark.parametrize("alpha_from", ["calibration", "test"])
@pytest.mark.parametrize("h", [0.05, 0.3, 2.0])
def test_dirichlet_kernel_matches_scipy_density(small, h, alpha_from):
    p_cal, y_cal, p_test = small
    cal = make_calibrator("kernel_dir", bandwidth=h, dirichlet_alpha=alpha_from)
    cal.fit(probs_to_logits(p_cal), y_cal)
    ref = _brute_force(p_cal, y_cal, p_test, _dirichlet_weights(p_cal, h, alpha_from), 1e-4)
    np.testing.assert_allclose(cal.predict_proba(probs_to_logits(p_test)), ref, atol=1e-10)


def test_the_two_dirichlet_centres_differ(small):
    """Would have caught the kernel centred on the wrong point."""
    p_cal, y_cal, p_test = small
    out = {
        a: make_calibrator("kernel_dir", bandwidth=0.3, dirichlet_alpha=a)
        .fit(probs_to_logits(p_cal), y_cal)
        .predict_proba(probs_to_logits(p_test))
        for a in ("calibration", "test")
    }
    assert np.abs(out["calibration"] - out["test"]).max() > 1e-3


@pytest.mark.parametrize("cropping", ["outside", "clip"])
def test_cropping_modes_against_brute_force(small, cropping):
    """Valk's code moves only entries outside [0, 1]; the printed Algorithm 2 clips all."""
    p_cal, y_cal, p_test = small
    cal = make_calibrator("knn_kl", n_neighbors=3, epsilon=1e-2, cropping=cropping)
    out = cal.fit(probs_to_logits(p_cal), y_cal).predict_proba(probs_to_logits(p_test))
    ref = _brute_force(p_cal, y_cal, p_test, _knn_weights(p_cal, 3, "kl"), 1e-2, cropping)
    np.testing.assert_allclose(out, ref, atol=1e-12)
    small_entries = (out < 0.5e-2).any()
    assert small_entries == (cropping == "outside")  # clip lifts every entry to >= ~eps


@pytest.mark.parametrize("gamma", [0.5, 30.0, 3000.0])
def test_rbf_kernel_matches_brute_force(small, gamma):
    p_cal, y_cal, p_test = small
    cal = make_calibrator("kernel_rbf", bandwidth=gamma).fit(probs_to_logits(p_cal), y_cal)

    def weights(p):
        d2 = ((p_cal - p) ** 2).sum(axis=1)
        return np.exp(-gamma * (d2 - d2.min()))  # shift for float range; cancels

    ref = _brute_force(p_cal, y_cal, p_test, weights, 1e-4)
    np.testing.assert_allclose(cal.predict_proba(probs_to_logits(p_test)), ref, atol=1e-10)


def test_cropping_invariants(rng):
    raw = rng.normal(0.25, 0.4, size=(500, 4))
    out = crop(raw, 1e-3)
    assert np.allclose(out.sum(axis=1), 1)
    assert (out > 0).all() and (out < 1).all()
    inside = rng.dirichlet([5, 5, 5, 5], 100)  # far from the border: unchanged
    np.testing.assert_allclose(crop(inside, 1e-4), inside, atol=1e-15)


def test_chunking_does_not_change_results(small, monkeypatch):
    import calbench.calibrators.neighbourhood.kernel as nb

    p_cal, y_cal, p_test = small
    cal = make_calibrator("knn_kl", n_neighbors=20).fit(probs_to_logits(p_cal), y_cal)
    whole = cal.predict_proba(probs_to_logits(p_test))
    monkeypatch.setattr(nb, "_CHUNK_ENTRIES", 700)  # two test rows per chunk
    np.testing.assert_array_equal(cal.predict_proba(probs_to_logits(p_test)), whole)


def test_forest_with_one_bin_subtracts_the_mean_error(small):
    p_cal, y_cal, p_test = small
    cal = make_calibrator("forest", n_trees=3, n_bins=1).fit(probs_to_logits(p_cal), y_cal)
    mean_error = (p_cal - np.eye(4)[y_cal]).mean(axis=0)
    np.testing.assert_allclose(
        cal.predict_proba(probs_to_logits(p_test)), crop(p_test - mean_error, 1e-4), atol=1e-12
    )


def test_forest_tree_is_a_partition_with_leaf_mean_corrections(small):
    p_cal, y_cal, p_test = small
    cal = make_calibrator("forest", n_trees=1, n_bins=8, random_state=4)
    cal.fit(probs_to_logits(p_cal), y_cal)
    leaves_cal = cal._leaves(0, p_cal)
    np.testing.assert_array_equal(leaves_cal, cal.leaf_of_calibration_[0])
    assert len(np.unique(leaves_cal)) == 8  # 300 distinct points: every split succeeds
    leaves_test = cal._leaves(0, p_test)
    errors = p_cal - np.eye(4)[y_cal]
    expected = np.array(
        [
            p - errors[leaves_cal == leaf].mean(axis=0)
            for p, leaf in zip(p_test, leaves_test, strict=True)
        ]
    )
    np.testing.assert_allclose(
        cal.predict_proba(probs_to_logits(p_test)), crop(expected, 1e-4), atol=1e-12
    )
    again = make_calibrator("forest", n_trees=1, n_bins=8, random_state=4)
    again.fit(probs_to_logits(p_cal), y_cal)
    np.testing.assert_array_equal(again.threshold_, cal.threshold_)


def test_isotonic_is_scikit_learn_per_class_renormalised(small):
    p_cal, y_cal, p_test = small
    cal = make_calibrator("isotonic_plain").fit(probs_to_logits(p_cal), y_cal)
    ref = np.column_stack(
        [
            IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
            .fit(p_cal[:, j], y_cal == j)
            .predict(p_test[:, j])
            for j in range(4)
        ]
    )
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(cal.predict_proba(probs_to_logits(p_test)), ref, atol=1e-12)


def test_beta_matches_betacal(small):
    betacal = pytest.importorskip("betacal")
    p_cal, y_cal, p_test = small
    cal = make_calibrator("beta").fit(probs_to_logits(p_cal), y_cal)
    ref = np.column_stack(
        [
            betacal.BetaCalibration("abm")
            .fit(p_cal[:, j], (y_cal == j).astype(int))
            .predict(p_test[:, j])
            for j in range(4)
        ]
    )
    ref /= ref.sum(axis=1, keepdims=True)
    # betacal fits with scikit-learn's default tolerance; ours is tighter.
    np.testing.assert_allclose(cal.predict_proba(probs_to_logits(p_test)), ref, atol=2e-3)


def test_histogram_binning_hand_example():
    p = np.array([[0.05, 0.95], [0.15, 0.85], [0.45, 0.55], [0.55, 0.45], [0.95, 0.05]])
    y = np.array([1, 0, 1, 0, 0])
    # The plain class (method histbin_width is the smoothed variant Kull et al. ran).
    cal = registered_calibrator("histbin_width", n_bins=2).fit(probs_to_logits(p), y)
    # class 0: bin [0, .5) holds rows 0-2 with labels 0? -> 1/3; bin [.5, 1] rows 3-4 -> 1
    # class 1: bin [0, .5) rows 3-4 -> 0; bin [.5, 1] rows 0-2 -> 2/3
    out = cal.predict_proba(probs_to_logits(np.array([[0.2, 0.8], [0.7, 0.3]])))
    np.testing.assert_allclose(out, [[1 / 3, 2 / 3], [1.0, 0.0]])


def test_equal_frequency_binning_uses_calibration_quantiles():
    p0 = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.8])
    p = np.column_stack([p0, 1 - p0])
    y = np.array([1, 1, 0, 0, 0, 1])
    cal = registered_calibrator("histbin_freq", n_bins=2).fit(probs_to_logits(p), y)
    # class 0 bins: {.1 .2 .3} -> 1/3, {.6 .7 .8} -> 2/3; a score of .45 falls in the upper bin
    out = cal._apply_binary(cal.maps_[0], np.array([0.05, 0.3, 0.45, 0.9]))
    np.testing.assert_allclose(out, [1 / 3, 1 / 3, 2 / 3, 2 / 3])


def test_composition_equals_chaining_by_hand(synthetic):
    x, y = synthetic.logits_cal, synthetic.y_cal
    comp = make_calibrator("compose", first="ts", second="knn_kl", second__n_neighbors=64)
    comp.fit(x, y)
    ts = make_calibrator("ts").fit(x, y)
    knn = make_calibrator("knn_kl", n_neighbors=64).fit(probs_to_logits(ts.predict_proba(x)), y)
    test = synthetic.logits_test[:500]
    expected = knn.predict_proba(probs_to_logits(ts.predict_proba(test)))
    np.testing.assert_allclose(comp.predict_proba(test), expected, atol=1e-12)
    assert comp.get_params()["second__n_neighbors"] == 64


def test_bad_hyperparameters_are_clear(small):
    p_cal, y_cal, _ = small
    x = probs_to_logits(p_cal)
    with pytest.raises(
        CalbenchError, match="'n_neighbors' parameter of KNNCalibrator must be an int >= 1"
    ):
        make_calibrator("knn_kl", n_neighbors=0).fit(x, y_cal)
    # More neighbours than samples: clipped to all of them (documented), same as k = n.
    clipped = make_calibrator("knn_kl", n_neighbors=4096).fit(x, y_cal)
    assert clipped.n_neighbors_ == 300
    np.testing.assert_allclose(
        clipped.predict_proba(x),
        make_calibrator("knn_kl", n_neighbors=300).fit(x, y_cal).predict_proba(x),
    )
    with pytest.raises(
        CalbenchError, match="'bandwidth' parameter of KernelCalibrator must be a finite number > 0"
    ):
        make_calibrator("kernel_dir", bandwidth=0).fit(x, y_cal)
    with pytest.raises(CalbenchError, match="power of two"):
        make_calibrator("forest", n_bins=12).fit(x, y_cal)
    with pytest.raises(CalbenchError, match="'n_bins' parameter of HistogramBinning"):
        registered_calibrator("histbin_width", n_bins=0).fit(x, y_cal)
    with pytest.raises(CalbenchError, match="compose needs first=NAME"):
        make_calibrator("compose", first="ts")


def test_exact_zeros_are_far_but_finite():
    p = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]] * 5)
    y = np.array([0, 1, 2, 2] * 5)
    out = (
        make_calibrator("knn_kl", n_neighbors=3)
        .fit(probs_to_logits(p), y)
        .predict_proba(probs_to_logits(p))
    )
    assert np.isfinite(out).all() and np.allclose(out.sum(axis=1), 1)
    assert np.isfinite(softmax(probs_to_logits(p))).all()


def test_decision_calibration_zeroes_each_parts_average_correction(synthetic):
    """Zhao et al.'s defining property: after an update, the residual weighted by each part
    of that iteration's partition vanishes on the fitting data."""
    x, y = synthetic.logits_cal, synthetic.y_cal
    cal = make_calibrator("dec", n_iterations=4, n_steps=100).fit(x, y)
    probs = softmax(x)
    before, after = cal.adjusted(probs, 3), cal.adjusted(probs)
    weights = softmax(before @ cal.partitions_[-1].T)
    residual = np.eye(3)[y] - after
    assert np.abs(weights.T @ residual / len(y)).max() < 1e-12
    assert np.abs(weights.T @ (np.eye(3)[y] - before) / len(y)).max() > 1e-4
    # and the calibrated test predictions are closer to the true map than the inputs
    c = synthetic.true_map(synthetic.probs_test)
    p = cal.predict_proba(synthetic.logits_test)
    assert np.abs(p - c).mean() < 0.7 * np.abs(synthetic.probs_test - c).mean()
    np.testing.assert_allclose(p.sum(axis=1), 1)


def test_decision_search_gradient_and_adam_equal_autograds_and_torchs(rng):
    """The hand-written search (gradient of the violation, Adam's update) against autograd
    and torch.optim.Adam."""
    import torch

    from calbench.calibrators.decision.decision_calibration import _Adam, violation_gradient

    probs = torch.from_numpy(softmax(rng.normal(size=(300, 5)) * 2))
    residual = torch.from_numpy(np.eye(5)[rng.integers(0, 5, 300)]) - probs
    noise = torch.from_numpy(rng.normal(size=(300, 2)) * 0.1)
    mine = torch.from_numpy(rng.normal(size=(2, 5)))
    reference = mine.clone().requires_grad_(True)
    optimiser, adam = torch.optim.Adam([reference], lr=1e-2), _Adam(mine, 1e-2)
    for _ in range(5):
        optimiser.zero_grad()
        weights = torch.softmax(probs @ reference.T + noise, dim=1)
        (-(weights.T @ residual / 300).norm(dim=1).sum()).backward()
        grad = -violation_gradient(probs @ mine.T + noise, probs, residual)
        torch.testing.assert_close(grad, reference.grad, rtol=1e-12, atol=1e-15)
        optimiser.step()
        adam.step(grad)
        torch.testing.assert_close(mine, reference.detach(), rtol=1e-12, atol=1e-15)


def test_decision_calibration_fitted_longer_contains_every_shorter_fit(synthetic, monkeypatch):
    """n_iterations is a prefix parameter: the first k corrections of a 5-iteration fit are
    a k-iteration fit, so inner CV fits once per fold and chooses as the plain grid would."""
    from calbench.calibrators.decision.decision_calibration import DecisionCalibrator
    from calbench.runner.selection import select_and_fit

    x, y = synthetic.logits_cal[:1500], synthetic.y_cal[:1500]
    ts_dec = make_calibrator("compose", first="ts", second="dec", second__n_steps=40)
    long = ts_dec.set_params(second__n_iterations=5).fit(x, y)
    for k in (1, 2, 4):
        short = make_calibrator("compose", first="ts", second="dec", second__n_steps=40)
        short.set_params(second__n_iterations=k).fit(x, y)
        cut = long.truncated("second__n_iterations", k)
        assert cut.get_params()["second__n_iterations"] == k
        # Equal up to the last bits that threaded torch reductions vary between any two fits.
        np.testing.assert_allclose(cut.predict_proba(x), short.predict_proba(x), rtol=1e-10)
    assert long.predict_proba(x).shape == (1500, 3)  # the long model is left as it was
    assert len(long.second_.partitions_) == 5

    grid = {"second__n_iterations": [1, 2, 5]}
    fits = []
    original_fit = DecisionCalibrator.fit
    monkeypatch.setattr(
        DecisionCalibrator,
        "fit",
        lambda self, *a: fits.append(self.n_iterations) or original_fit(self, *a),
    )
    fast, chosen = select_and_fit(ts_dec, grid, x, y, inner_folds=3, seed=0)
    assert fits[:3] == [5, 5, 5]  # one fit per inner fold, at the largest value
    monkeypatch.setattr(DecisionCalibrator, "prefix_params", ())
    plain, chosen_plain = select_and_fit(ts_dec, grid, x, y, inner_folds=3, seed=0)
    assert chosen == chosen_plain
    np.testing.assert_allclose(fast.predict_proba(x), plain.predict_proba(x), rtol=1e-10)


@pytest.mark.parametrize("name", ["iop_full", "iop_diag"])
def test_order_preserving_maps_keep_the_order_of_every_row(name, rng):
    z = rng.normal(size=(400, 5)) * 3
    y = (z + rng.gumbel(size=z.shape) * 2).argmax(axis=1)
    cal = make_calibrator(name, hidden=(8, 8), max_iter=100).fit(z, y)
    test = rng.normal(size=(300, 5)) * 5
    out = cal.predict_proba(test)
    # Along the logits' decreasing order the outputs never increase (ties may appear where
    # an increment falls below float precision), so the top class keeps the top probability.
    by_logit = np.take_along_axis(out, np.argsort(-test, axis=1), axis=1)
    assert (np.diff(by_logit, axis=1) <= 0).all()
    assert (out[np.arange(300), test.argmax(axis=1)] == out.max(axis=1)).all()
    # and it learns: the over-confident logits (labels noisier than z says) get cooled
    loss = -np.log(cal.predict_proba(z)[np.arange(400), y]).mean()
    assert loss < -np.log(softmax(z)[np.arange(400), y]).mean()


def test_kulls_smoothed_binning_on_six_points():
    """Kull et al.'s BinningCalibration by hand: (positives + 1) / (n + 2) per bin."""
    from calbench.calibrators.binning.histogram import SmoothedBinning

    scores = np.array([0.1, 0.2, 0.35, 0.6, 0.8, 0.9])
    hits = np.array([0.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    width = SmoothedBinning(n_bins=2, strategy="uniform")
    fitted = width._fit_binary(scores, hits)  # edges 0.1, 0.5, 0.9: 1 of 3, 2 of 3
    np.testing.assert_allclose(fitted[1], [2 / 5, 3 / 5])
    np.testing.assert_allclose(
        width._apply_binary(fitted, np.array([-1.0, 0.49, 0.51, 7.0])), [0.4, 0.4, 0.6, 0.6]
    )  # outside the range: the end bins
    five = SmoothedBinning(n_bins=5, strategy="uniform")._fit_binary(scores, hits)
    np.testing.assert_allclose(five[1], [1 / 4, 2 / 3, 1 / 2, 1 / 3, 3 / 4])  # empty bin: 1/2
    freq = SmoothedBinning(n_bins=4, strategy="quantile")._fit_binary(scores, hits)
    # step ceil(6 / 4) = 2: edges at 0.1, 0.35, 0.8 -> three bins of two points
    np.testing.assert_allclose(freq[0][1:-1], [0.35, 0.8])
    np.testing.assert_allclose(freq[1][:3], [1 / 4, 2 / 4, 3 / 4])  # a 4th bin is never used


def test_smoothed_binning_rows_stay_on_the_simplex(small):
    p_cal, y_cal, p_test = small
    for name in ("binning_width_smoothed", "binning_freq_smoothed"):
        out = make_calibrator(name, n_bins=10).fit(probs_to_logits(p_cal), y_cal)
        q = out.predict_proba(probs_to_logits(p_test))
        np.testing.assert_allclose(q.sum(axis=1), 1)
        assert (q > 0).all()  # smoothing: no class is ever given exactly 0


def test_one_vs_rest_grid_choice_on_validation_is_per_class():
    """Kull et al.'s OneVsRestCalibrator hands each class's binning its own validation
    column: each class keeps the bin count with the lowest binary log-loss there."""
    from sklearn.metrics import log_loss as sk_log_loss

    from calbench.runner.selection import select_on_validation

    rng = np.random.default_rng(1)  # a draw where the classes choose three ways
    z, y = overconfident_logits(rng, 60, 3)
    z_val, y_val = overconfident_logits(rng, 400, 3)
    grid = {"n_bins": [2, 5, 30]}
    model, chosen = select_on_validation(
        make_calibrator("binning_width_smoothed"), grid, z, y, z_val, y_val
    )
    p_val = softmax(z_val)
    expected = []
    for j in range(3):
        losses = []
        for n_bins in grid["n_bins"]:
            fitted = make_calibrator("binning_width_smoothed", n_bins=n_bins).fit(z, y)
            q = fitted._apply_binary(fitted.maps_[j], p_val[:, j])
            losses.append(sk_log_loss(y_val == j, np.column_stack([1 - q, q]), labels=[0, 1]))
        expected.append(grid["n_bins"][int(np.argmin(losses))])
    assert chosen == {"n_bins": expected}
    assert len(set(expected)) > 1  # the classes really chose differently here
    for j, n_bins in enumerate(expected):
        alone = make_calibrator("binning_width_smoothed", n_bins=n_bins).fit(z, y)
        np.testing.assert_array_equal(model.maps_[j][1], alone.maps_[j][1])
