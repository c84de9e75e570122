"""Metrics against peer libraries, hand-worked examples and naive reference loops."""

import numpy as np
import pytest
import sklearn.metrics as skm

from calbench import metrics
from calbench.errors import CalbenchError
from calbench.metrics.binned import bin_indices
from calbench.simplex import softmax
from tests.calibrators.test_spline import _numpy1_argsort
from tests.conftest import overconfident_logits


@pytest.fixture
def scored(rng):
    z, y = overconfident_logits(rng, 3000, 5, scale=1.5)
    return softmax(z), y


@pytest.mark.parametrize("n_bins", [5, 15, 100])
@pytest.mark.parametrize("alpha,norm", [(1, "l1"), (2, "l2")])
def test_confidence_ece_matches_torchmetrics(scored, n_bins, alpha, norm):
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    p, y = scored
    ref = tm.multiclass_calibration_error(
        torch.from_numpy(p), torch.from_numpy(y), num_classes=5, n_bins=n_bins, norm=norm
    )
    ours = metrics.confidence_ece(p, y, n_bins=n_bins, alpha=alpha)
    assert ours == pytest.approx(float(ref), abs=1e-6)


def test_confidence_ece_edges_match_torchmetrics():
    # Confidences exactly on interior bin edges and ties: the cases peers disagree on.
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    conf = np.array([0.5, 0.5, 0.6, 0.7, 0.9, 0.8, 0.55, 0.95])
    p = np.column_stack([conf, 1 - conf])
    y = np.array([0, 1, 0, 1, 0, 0, 1, 1])
    ref = tm.multiclass_calibration_error(
        torch.from_numpy(p), torch.from_numpy(y), num_classes=2, n_bins=10, norm="l1"
    )
    assert metrics.confidence_ece(p, y, n_bins=10) == pytest.approx(float(ref), abs=1e-7)


def test_confidence_of_exactly_one_joins_the_last_bin():
    # torchmetrics gives a confidence of exactly 1.0 a bin of its own (bucketize past the
    # last edge); we close the last bin, as the papers' definition [0.9, 1.0] reads.
    conf = np.array([1.0, 1.0, 0.9])
    p = np.column_stack([conf, 1 - conf])
    y = np.array([0, 1, 0])
    # one bin: mean confidence 29/30, accuracy 2/3
    assert metrics.confidence_ece(p, y, n_bins=10) == pytest.approx(2.9 / 3 - 2 / 3)


def test_equal_width_bins_are_half_open_with_a_closed_last_bin():
    scores = np.array([0.0, 0.1, 0.0999, 0.5, 0.9999, 1.0])
    np.testing.assert_array_equal(bin_indices(scores, 10, "equal_width"), [0, 1, 0, 5, 9, 9])


def test_equal_size_bins_split_sorted_scores_evenly():
    scores = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8])
    bins = bin_indices(scores, 3, "equal_size")
    # sorted: .1 .2 .3 | .5 .7 | .8 .9  (sizes 3, 2, 2)
    np.testing.assert_array_equal(bins, [2, 0, 1, 0, 1, 0, 2])


def test_equal_size_bins_cut_ties_as_valks_code_did_under_numpy1():
    """Valk's EqualSizeBinning (helpers/binnings.py): ``np.argsort(p)``, cut by
    ``np.array_split``, the gap of each bin's mean weighted by its size. Under his numpy
    1.19 that argsort was the classic introsort, which numpy 2 still runs for int16: the
    written-out reference sorts the confidences' dense ranks as int16. A clipped top
    confidence shared by 40% of the rows straddles several cuts, as his KNN's does."""
    rng = np.random.default_rng(4)
    n = 5000
    confidence = rng.uniform(0.4, 0.99, n)
    confidence[rng.random(n) < 0.4] = 0.995
    correct = (rng.random(n) < confidence).astype(float)
    p = np.column_stack([confidence, (1 - confidence) / 2, (1 - confidence) / 2])
    y = np.where(correct == 1, 0, 1)
    order = _numpy1_argsort(confidence)
    cuts = np.array_split(np.arange(n), 15)
    valk = sum(abs(confidence[order][b].mean() - correct[order][b].mean()) * len(b) for b in cuts)
    assert metrics.confidence_ece(p, y, 15, "equal_size") == pytest.approx(valk / n, rel=1e-12)
    stable = metrics.confidence_ece(p, y, 15, "equal_size_stable")
    assert abs(stable - valk / n) > 1e-4  # which tied rows fall in which bin matters


def test_equal_size_bins_take_numpy1s_order_only_where_ties_straddle_a_cut(rng):
    """bin_indices sorts in sample order unless a run of equal scores straddles a cut:
    the bins are those of numpy 1.x's whole order either way."""
    from calbench.metrics.binned import equal_size_order

    for _ in range(200):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 20))
        scores = rng.integers(0, int(rng.integers(1, 30)), n) / 7.0
        order = equal_size_order(scores)
        expected = np.empty(n, dtype=int)
        expected[order] = np.repeat(np.arange(k), [len(c) for c in np.array_split(order, k)])
        np.testing.assert_array_equal(bin_indices(scores, k, "equal_size"), expected)


def test_classwise_ece_hand_example():
    # Two classes, two equal-width bins. Class 0 scores: .2 .4 | .6 .8, labels 0 for rows 1, 3.
    p = np.array([[0.2, 0.8], [0.4, 0.6], [0.6, 0.4], [0.8, 0.2]])
    y = np.array([1, 0, 1, 0])
    # class 0: bin [0,.5): mean p .3, freq .5 -> |.2|*.5 ; bin [.5,1]: mean .7, freq .5 -> .1
    # class 1: mirror image -> same 0.2
    assert metrics.classwise_ece(p, y, n_bins=2) == pytest.approx(0.2)
    # equal-size, 4 bins: every bin one sample; class 0 gaps .2 .6 .6 .2 -> mean .4
    assert metrics.classwise_ece(p, y, n_bins=4, binning="equal_size") == pytest.approx(0.4)


def test_classwise_ece_matches_naive_loop(scored):
    p, y = scored
    k, n_bins = p.shape[1], 15
    per_class = []
    for j in range(k):
        total = 0.0
        for b in range(n_bins):
            lo, hi = b / n_bins, (b + 1) / n_bins
            inside = (p[:, j] >= lo) & ((p[:, j] < hi) if b < n_bins - 1 else (p[:, j] <= hi))
            if inside.any():
                total += inside.mean() * abs((y[inside] == j).mean() - p[inside, j].mean())
        per_class.append(total)
    assert metrics.classwise_ece(p, y, n_bins=n_bins) == pytest.approx(np.mean(per_class))


def test_mce_hand_example():
    p = np.array([[0.95, 0.05], [0.95, 0.05], [0.6, 0.4], [0.6, 0.4]])
    y = np.array([0, 1, 0, 0])
    # bin of .95: accuracy .5 -> gap .45; bin of .6: accuracy 1 -> gap .4
    assert metrics.mce(p, y, n_bins=10) == pytest.approx(0.45)


def test_scoring_rules_match_scikit_learn(scored):
    p, y = scored
    assert metrics.log_loss(p, y) == pytest.approx(skm.log_loss(y, p), rel=1e-12)
    one_hot = np.eye(p.shape[1])[y]
    assert metrics.brier(p, y) == pytest.approx(((p - one_hot) ** 2).sum(axis=1).mean())
    assert metrics.accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p.argmax(axis=1)))


def test_log_loss_of_zero_probability_is_finite():
    assert metrics.log_loss(np.array([[1.0, 0.0]]), [1]) == pytest.approx(708.3964, abs=1e-3)


def test_true_errors_vanish_for_the_true_map_only(synthetic):
    c = synthetic.true_map(synthetic.probs_test)
    assert metrics.true_confidence_ce(c, c) == 0.0
    assert metrics.true_classwise_ce(c, c) == 0.0
    assert metrics.true_confidence_ce(synthetic.probs_test, c) > 0.05


def test_true_confidence_ce_hand_example():
    p = np.array([[0.7, 0.2, 0.1], [0.2, 0.3, 0.5]])
    c = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    assert metrics.true_confidence_ce(p, c) == pytest.approx((0.2 + 0.1) / 2)
    assert metrics.true_confidence_ce(p, c, alpha=2) == pytest.approx(np.sqrt((0.04 + 0.01) / 2))
    # per class mean |p - c|: (.2+0)/2, (.1+.1)/2, (.1+.1)/2 -> mean .1
    assert metrics.true_classwise_ce(p, c) == pytest.approx(0.1)


def _loss_gap_reference(p, target_rows, n_losses, seed, n_decisions=2):
    """Zhao et al.'s definition, one loss at a time."""
    shape = (n_losses, p.shape[1], n_decisions)
    losses = np.random.default_rng(seed).standard_normal(shape)
    gaps = []
    for L in losses:
        d = (p @ L).argmin(axis=1)
        predicted = (p @ L)[np.arange(len(p)), d].mean()
        actual = (target_rows @ L)[np.arange(len(p)), d].mean()
        gaps.append(abs(predicted - actual))
    return np.mean(gaps)


def test_average_loss_gap_matches_reference_loop(scored, synthetic):
    p, y = scored
    one_hot = np.eye(p.shape[1])[y]
    assert metrics.average_loss_gap(p, y, n_losses=120) == pytest.approx(
        _loss_gap_reference(p, one_hot, 120, 0), rel=1e-12
    )
    q = synthetic.probs_test[:3000]
    c = synthetic.true_map(q)
    assert metrics.average_loss_gap(q, true_probs=c, n_losses=70, seed=3) == pytest.approx(
        _loss_gap_reference(q, c, 70, 3), rel=1e-12
    )
    # Three decisions take the general running minimum; the reference loop is the same.
    assert metrics.average_loss_gap(p, y, n_losses=40, n_decisions=3) == pytest.approx(
        _loss_gap_reference(p, one_hot, 40, 0, n_decisions=3), rel=1e-12
    )


def test_average_loss_gap_is_zero_for_true_map_and_empirical_close_to_exact(synthetic):
    c = synthetic.true_map(synthetic.probs_test)
    assert metrics.average_loss_gap(c, true_probs=c) == 0.0
    exact = metrics.average_loss_gap(synthetic.probs_test, true_probs=c)
    empirical = metrics.average_loss_gap(synthetic.probs_test, synthetic.y_test)
    assert empirical == pytest.approx(exact, abs=0.01)


def test_empirical_risk_zero_one_is_error_rate(scored):
    p, y = scored
    from calbench.decision import zero_one, zero_one_reject

    assert metrics.empirical_risk(p, y, loss_matrix=zero_one(5)) == pytest.approx(
        1 - metrics.accuracy(p, y)
    )
    # With reject cost 0 everything is rejected at no cost.
    assert metrics.empirical_risk(p, y, loss_matrix=zero_one_reject(5, 0.0)) == 0.0
    assert metrics.empirical_risk(p, y, loss_matrix=zero_one(5), reduction="sum") == pytest.approx(
        len(y) * (1 - metrics.accuracy(p, y))
    )


@pytest.mark.parametrize("name", sorted(metrics.METRICS))
def test_every_metric_returns_a_finite_float(name, scored):
    p, y = scored
    from calbench.decision import zero_one

    out = metrics.evaluate(
        {name: {}},
        p,
        y=y,
        true_probs=p[::-1].copy(),
        reference_probs=p[::-1].copy(),
        loss_matrix=zero_one(5),
    )
    assert isinstance(out[name], float) and np.isfinite(out[name])


def test_option_errors_use_one_format(scored):
    p, y = scored
    with pytest.raises(
        CalbenchError,
        match=r"The 'n_bins' parameter of confidence_ece must be "
        r"an int >= 1. Got 0 instead.",
    ):
        metrics.confidence_ece(p, y, n_bins=0)
    with pytest.raises(CalbenchError, match="'binning' parameter of classwise_ece must be one of"):
        metrics.classwise_ece(p, y, binning="quantile")
    with pytest.raises(CalbenchError, match="simplex"):
        metrics.brier(p * 2, y)
    with pytest.raises(CalbenchError, match="Unknown metric"):
        metrics.evaluate({"ece": {}}, p, y=y)


def test_top1_brier_hand_example():
    p = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3]])
    y = np.array([0, 2])
    # confidences .7 (right) and .5 (wrong): ((.7 - 1)^2 + (.5 - 0)^2) / 2
    assert metrics.top1_brier(p, y) == pytest.approx((0.09 + 0.25) / 2)


def test_kde_density_matches_kdepy_fftkde(rng):
    kdepy = pytest.importorskip("KDEpy")
    from calbench.metrics.kde import _GRID, _reflect, triweight_density

    data = _reflect(rng.beta(5, 2, 2000))
    for bandwidth in (0.01, 0.04):
        ref = kdepy.FFTKDE(bw=bandwidth, kernel="triweight").fit(data[:, None]).evaluate(_GRID)
        np.testing.assert_allclose(triweight_density(data, bandwidth), ref, atol=1e-10)


def test_kde_ece_follows_zhangs_estimator(rng):
    # Reference: KDEpy densities and Zhang et al.'s integral written out point by point.
    kdepy = pytest.importorskip("KDEpy")
    from calbench.metrics import kde_ece
    from calbench.metrics.kde import _GRID, _reflect

    n = 800
    p = rng.dirichlet(np.full(5, 0.4), n)
    y = np.array([rng.choice(5, p=row) if rng.random() < 0.8 else 0 for row in p])
    conf, right = p.max(1), p.argmax(1) == y
    h = np.std(conf[right]) * (2 * n) ** -0.2

    def density(d):
        f = 2 * kdepy.FFTKDE(bw=h, kernel="triweight").fit(_reflect(d)[:, None]).evaluate(_GRID)
        f[(_GRID <= 0) | (_GRID >= 1)] = 0
        return f

    f1, f = density(conf[right]), density(conf)
    integrand = np.zeros(len(_GRID))
    for i, x in enumerate(_GRID):
        if max(f1[i], f[i]) > 1e-6:
            acc = min(right.mean() * f1[i] / f[i], 1.0) if f[i] > 0 else 1.0
            integrand[i] = abs(x - acc) * f[i]
        elif i > 1:
            integrand[i] = integrand[i - 1]
    unit = (_GRID >= 0) & (_GRID <= 1)
    expected = np.trapezoid(integrand[unit], _GRID[unit]) / np.trapezoid(f[unit], _GRID[unit])
    assert kde_ece(p, y) == pytest.approx(expected, rel=1e-8)


def test_kde_ece_vanishes_when_calibrated_and_sees_a_constant_gap(rng):
    from calbench.metrics import kde_ece

    def predictor(n, gap):
        c = rng.uniform(0.4, 0.95, n)
        p = np.column_stack([c, np.repeat((1 - c)[:, None] / 3, 3, axis=1)])
        return p, np.where(rng.random(n) < c - gap, 0, 1)

    values = [kde_ece(*predictor(n, 0.0)) for n in (1000, 100_000)]
    assert values[1] < values[0] and values[1] < 0.005
    assert kde_ece(*predictor(100_000, 0.1)) == pytest.approx(0.1, abs=0.01)


def _kull_binary_ece(p, y, bins=15):
    """Kull et al.'s binary_ECE (experiments_dnn utility/evaluation.py), loop for loop."""
    idx = np.digitize(p, np.linspace(0, 1, bins)) - 1
    total = 0.0
    for i in np.unique(idx):
        in_bin = idx == i
        total += abs(p[in_bin].mean() - y[in_bin].mean()) * in_bin.sum() / len(p)
    return total


def test_classwise_ece_digitize_sum_is_kulls_deep_net_measure(rng):
    probs = rng.dirichlet([0.3] * 6, 3000)
    probs[:5] = np.eye(6)[:5]  # p == 1 has its own bin in numpy.digitize
    y = rng.integers(0, 6, 3000)
    onehot = np.eye(6)[y]
    ref = sum(_kull_binary_ece(probs[:, j], onehot[:, j]) for j in range(6))
    ours = metrics.classwise_ece(probs, y, n_bins=15, binning="digitize", reduction="sum")
    assert ours == pytest.approx(ref, rel=1e-12)
    mean = metrics.classwise_ece(probs, y, n_bins=15, binning="digitize")
    assert mean == pytest.approx(ref / 6, rel=1e-12)


def test_log_loss_clip_is_scikit_learn_before_1_5(rng):
    """eps-clipping then renormalising each row, as sklearn.metrics.log_loss(eps=1e-15) did."""
    probs = rng.dirichlet([0.2] * 4, 500)
    probs[0] = [1.0, 0.0, 0.0, 0.0]
    y = rng.integers(0, 4, 500)
    y[0] = 1  # a zero probability on the label
    eps = 1e-15
    clipped = np.clip(probs, eps, 1 - eps)
    clipped /= clipped.sum(axis=1, keepdims=True)
    ref = -np.mean(np.log(clipped[np.arange(500), y]))
    assert metrics.log_loss(probs, y, clip=eps) == pytest.approx(ref, rel=1e-13)
    assert metrics.log_loss(probs, y) > metrics.log_loss(probs, y, clip=eps)  # 708 vs 34.5
    with pytest.raises(CalbenchError, match="'clip' parameter of log_loss"):
        metrics.log_loss(probs, y, clip=0.7)


def test_average_loss_gap_with_valks_draws(rng):
    """Valk's generate_normal_cost_matrices + loss_gap, written out."""
    probs = rng.dirichlet([1.0] * 5, 400)
    y = rng.integers(0, 5, 400)
    np.random.seed(0)  # noqa: NPY002 -- Valk's code draws from the legacy global generator
    costs = np.random.normal(0, 1, 5 * 2 * 50).reshape((50, 2, 5))  # noqa: NPY002
    decisions = np.argmin(np.einsum("pc,mdc->mpd", probs, costs), axis=2)
    picked = costs[np.arange(50)[:, None], decisions]
    onehot = np.eye(5)[y]
    gap = np.abs(
        np.mean(np.sum(picked * onehot, axis=2), 1) - np.mean(np.sum(picked * probs, 2), 1)
    )
    ours = metrics.average_loss_gap(probs, y, n_losses=50, seed=0, draws="valk")
    assert ours == pytest.approx(gap.mean(), rel=1e-12)


@pytest.mark.parametrize("name", sorted(__import__("calbench.metrics").metrics.METRICS))
def test_every_metric_documents_its_parameters_and_return(name):
    """Numpydoc: a Parameters section naming every argument, and a Returns section."""
    import inspect
    import re

    from calbench.metrics import METRICS

    function = METRICS[name].function
    doc = inspect.getdoc(function) or ""
    assert "Parameters\n----------" in doc and "Returns\n-------" in doc, name
    documented = doc.split("Parameters\n----------")[1].split("Returns\n-------")[0]
    for parameter in inspect.signature(function).parameters.values():
        prefix = r"\*\*" if parameter.kind is parameter.VAR_KEYWORD else ""
        line = rf"^{prefix}{parameter.name}( : .+)?$"
        assert re.search(line, documented, re.MULTILINE), (name, parameter.name)


@pytest.mark.parametrize(("n", "k", "sharpen"), [(500, 3, 1.0), (5000, 10, 2.0), (20000, 5, 0.5)])
def test_smooth_ece_equals_relplot(n, k, sharpen):
    relplot = pytest.importorskip("relplot")
    from calbench.metrics import smooth_ece

    rng = np.random.default_rng(n)
    z = rng.normal(size=(n, k)) * 2
    true = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (true.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    p = np.exp(z * sharpen) / np.exp(z * sharpen).sum(axis=1, keepdims=True)
    f, correct = relplot.multiclass_logits_to_confidences(p, y, probs=True)
    assert smooth_ece(p, y) == pytest.approx(relplot.smECE(f, correct), rel=1e-12)
    fixed = relplot.smECE_sigma(f, correct, 0.05)
    assert smooth_ece(p, y, bandwidth=0.05) == pytest.approx(fixed, rel=1e-12)


def test_smooth_ece_sees_a_constant_gap_and_vanishes_when_calibrated(rng):
    from calbench.metrics import smooth_ece

    n = 200_000
    confidence = rng.uniform(0.55, 0.95, n)  # class 0 is the top class
    probs = np.column_stack([confidence, 1 - confidence])
    calibrated = (rng.random(n) >= confidence).astype(int)  # class 0 with prob. confidence
    assert smooth_ece(probs, calibrated) < 0.01
    gap = (rng.random(n) >= confidence - 0.1).astype(int)  # 10 points over-confident
    assert smooth_ece(probs, gap) == pytest.approx(0.1, abs=0.015)


@pytest.mark.parametrize(("n", "k", "sharpen"), [(2000, 5, 2.0), (5000, 10, 0.7)])
def test_calibration_refinement_split_equals_probmetrics(n, k, sharpen):
    torch = pytest.importorskip("torch")
    probmetrics = pytest.importorskip("probmetrics.metrics")
    from calbench.metrics import (
        brier,
        calibration_brier,
        calibration_log_loss,
        log_loss,
        refinement_brier,
        refinement_log_loss,
    )

    rng = np.random.default_rng(k)
    z = rng.normal(size=(n, k)) * 2
    truth = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    p = np.exp(z * sharpen) / np.exp(z * sharpen).sum(axis=1, keepdims=True)
    ours = {
        "calib-err_logloss_ts-mix_all": calibration_log_loss(p, y),
        "refinement_logloss_ts-mix_all": refinement_log_loss(p, y),
        "calib-err_brier_ts-mix_all": calibration_brier(p, y),
        "refinement_brier_ts-mix_all": refinement_brier(p, y),
    }
    reference = probmetrics.Metrics.from_names(list(ours)).compute_all_from_labels_probs(
        torch.as_tensor(y), torch.as_tensor(p)
    )
    for name, value in ours.items():
        assert value == pytest.approx(float(reference[name]), abs=1e-9), name
    assert ours["calib-err_logloss_ts-mix_all"] > 0.05  # the predictions are mis-tempered
    total = ours["calib-err_logloss_ts-mix_all"] + ours["refinement_logloss_ts-mix_all"]
    assert total == pytest.approx(log_loss(p, y), rel=1e-12)
    total = ours["calib-err_brier_ts-mix_all"] + ours["refinement_brier_ts-mix_all"]
    assert total == pytest.approx(brier(p, y), rel=1e-12)


def test_confidence_ece_sweep_takes_the_most_monotone_equal_size_bins(rng):
    """Roelofs et al.'s ECE_sweep (equal mass), against the definition written as a loop
    over bin counts with numpy.array_split."""
    from calbench.metrics import confidence_ece, confidence_ece_sweep

    n = 3000
    confidence = rng.uniform(0.5, 1.0, n)
    probs = np.column_stack([confidence, 1 - confidence])
    y = (rng.random(n) >= confidence - 0.05).astype(int)  # 5 points over-confident
    correct = (y == 0).astype(float)
    order = np.argsort(confidence, kind="stable")
    expected_bins = 1
    for b in range(2, n + 1):
        accuracies = [correct[part].mean() for part in np.array_split(order, b)]
        if any(hi < lo for lo, hi in zip(accuracies[:-1], accuracies[1:], strict=True)):
            break
        expected_bins = b
    assert 2 < expected_bins < 50
    expected = confidence_ece(probs, y, n_bins=expected_bins, binning="equal_size")
    assert confidence_ece_sweep(probs, y) == pytest.approx(expected, rel=1e-12)
    # Outcomes that rise with the confidence everywhere keep every sample in its own bin.
    ordered = np.where(np.arange(n) < n // 2, 1, 0)[np.argsort(order)]
    sorted_probs = np.column_stack([confidence, 1 - confidence])
    assert confidence_ece_sweep(sorted_probs, ordered) == pytest.approx(
        confidence_ece(sorted_probs, ordered, n_bins=n, binning="equal_size")
    )


def test_smoothed_reliability_equals_relplots_diagram_line():
    """The smoothed reliability diagram's line, bandwidth and smECE are relplot's
    ``prepare_rel_diagram`` (without its bootstrap band)."""
    diagrams = pytest.importorskip("relplot.diagrams")
    from calbench.metrics.binned import top_label
    from calbench.metrics.smooth import smoothed_reliability

    rng = np.random.default_rng(0)
    z = rng.normal(size=(3000, 5)) * 3
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    truth = np.exp(z / 2) / np.exp(z / 2).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) > rng.random((3000, 1))).argmax(axis=1)
    scores, outcomes = top_label(p, y)
    reference = diagrams.prepare_rel_diagram(
        scores, outcomes, plot_confidence_band=False, report_CE_std=False
    )
    ours = smoothed_reliability(p, y)
    np.testing.assert_allclose(ours["accuracy"], reference["mu"], atol=1e-12)
    np.testing.assert_allclose(ours["mesh"], reference["mesh"])
    assert ours["sigma"] == reference["sigma"]
    assert ours["smooth_ece"] == pytest.approx(reference["ce"], abs=1e-12)
    # Over-confident at temperature 2: the line runs below the diagonal at high confidence.
    high = ours["mesh"] > 0.8
    assert np.all(ours["accuracy"][high] < ours["mesh"][high])


@pytest.mark.parametrize("n", [1, 20, 1000])
@pytest.mark.parametrize("k", [2, 10])
def test_kde_ece_of_one_repeated_prediction_is_its_gap_to_the_accuracy(n, k):
    """Every row uniform: no density to estimate (Zhang's code returns up to 38 here); the
    estimate's h -> 0 limit is |1/k - accuracy|, an ECE in [0, 1]."""
    from calbench.metrics import kde_ece

    y = (np.arange(n) % 3 == 0).astype(int)  # argmax of a uniform row is class 0
    probs = np.full((n, k), 1.0 / k)
    accuracy = (y == 0).mean()
    assert kde_ece(probs, y) == pytest.approx(abs(1.0 / k - accuracy), abs=1e-12)
    assert kde_ece(probs, y, order=2) == pytest.approx((1.0 / k - accuracy) ** 2, abs=1e-12)


@pytest.mark.parametrize("binning", ["equal_width", "digitize"])
@pytest.mark.parametrize("alpha", [1, 2])
def test_classwise_ece_over_all_columns_at_once_equals_it_column_by_column(rng, binning, alpha):
    """The one-pass statistics (`_classwise_statistics`) give each class's ECE to the last
    bit, a probability of exactly 1 (digitize's extra bin) included."""
    from calbench.metrics.binned import _binned_error

    p = softmax(rng.normal(size=(700, 40)) * 2.5)
    p[0] = 0.0
    p[0, 3] = 1.0
    y = rng.integers(0, 40, 700)
    per_column = [
        _binned_error(p[:, j], (y == j).astype(float), 15, binning, alpha) for j in range(40)
    ]
    assert metrics.classwise_ece(p, y, binning=binning, alpha=alpha) == float(np.mean(per_column))
    total = metrics.classwise_ece(p, y, binning=binning, alpha=alpha, reduction="sum")
    assert total == float(np.sum(per_column))
