"""Bootstrap intervals of stored cells (`calbench.stats.bootstrap`) and the tables' marks."""

import numpy as np
import pytest
from scipy import stats

from calbench.conf_files import metric_sets
from calbench.data.synthetic import SyntheticTrueMap, sample_labels
from calbench.errors import CalbenchError
from calbench.metrics import METRICS  # noqa: E402
from calbench.metrics.binned import _binned_error, equal_size_order
from calbench.results.predictions import FoldPredictions
from calbench.simplex import softmax
from calbench.stats import bootstrap
from calbench.stats.bootstrap import (
    BootstrapSettings,
    bootstrap_cell,
    interval,
    resample_indices,
)

_PER_SAMPLE = {name for name, spec in METRICS.items() if spec.terms is not None}
_RESAMPLED = {name for name, spec in METRICS.items() if spec.resampled is not None}


def _fold(rng, n=1500, k=6, index=0, shift=2.0):
    z = 2.5 * rng.normal(size=(n, k))
    y = rng.integers(0, k, n)
    z[np.arange(n), y] += shift
    probs = softmax(z)
    return FoldPredictions(
        index, y, probs, softmax(0.7 * z), 1 - np.eye(k), true_probs=softmax(0.8 * z)
    )


@pytest.mark.parametrize("method", ["percentile", "BCa"])
def test_the_interval_of_a_mean_equals_scipy_bootstrap_on_the_same_draws(rng, monkeypatch, method):
    fold = _fold(rng)
    terms = -np.log(fold.probs[np.arange(len(fold.y)), fold.y])
    # scipy draws rng.integers(0, n, (B, n)) from the generator it is given: so do we,
    # unstratified, when the fold's generator is that one.
    monkeypatch.setattr(bootstrap, "fold_rng", lambda seed, y: np.random.default_rng(11))
    monkeypatch.setattr(bootstrap, "_DRAWN", bootstrap.OrderedDict())  # none drawn before
    boot = bootstrap_cell([fold], {"log_loss": {}}, 999, stratify=False)
    reference = stats.bootstrap(
        (terms,), np.mean, n_resamples=999, method=method, rng=np.random.default_rng(11)
    )
    got = boot.interval("log_loss", 0.05, method.lower())
    np.testing.assert_allclose(got, tuple(reference.confidence_interval), rtol=1e-13)
    assert boot.estimate["log_loss"] == pytest.approx(terms.mean(), rel=1e-13)


def test_stratified_resamples_keep_the_class_counts(rng):
    y = rng.integers(0, 4, 300)
    indices = resample_indices(y, 50, np.random.default_rng(0))
    assert (y[indices] == y[None, :]).all()  # position i draws among its own label
    assert len(np.unique(indices)) > 250  # and does resample


def test_methods_on_the_same_test_points_get_the_same_resamples(rng):
    fold = _fold(rng)
    other = FoldPredictions(0, fold.y, fold.uncalibrated, fold.uncalibrated, fold.loss)
    a = bootstrap_cell([fold], {"accuracy": {}}, 200)
    b = bootstrap_cell([other], {"accuracy": {}}, 200)
    # Same argmax, same labels, same resamples: the paired difference is exactly 0.
    np.testing.assert_array_equal(a.replicates["accuracy"], b.replicates["accuracy"])


#: Every binning and reduction the vectorised binned errors cover, beside the default set.
BINNED_VARIANTS = {
    f"{fn}_{binning}_{extra}": {"fn": fn, "n_bins": bins, "binning": binning, **options}
    for fn, extra, options in [
        ("confidence_ece", "l2", {"alpha": 2}),
        ("classwise_ece", "sum", {"reduction": "sum"}),
        ("classwise_ece", "l2", {"alpha": 2}),
        ("mce", "", {}),
    ]
    for binning, bins in [("equal_width", 10), ("equal_size", 15), ("digitize", 15)]
}


@pytest.mark.parametrize("n", [1500, 11])  # 11 points: equal-size bins of 0 and 1 points
def test_fast_paths_equal_the_metric_recomputed_on_each_resample(rng, n):
    """Per-sample means and the vectorised KS / binned errors give what each metric
    function gives on the resampled predictions (the general path), resample by resample."""
    fold = _fold(rng, n=n)
    metrics = {**metric_sets()["default"], **BINNED_VARIANTS}
    names = [
        m for m, options in metrics.items() if options.get("fn", m) in {*_PER_SAMPLE, *_RESAMPLED}
    ]
    assert {"confidence_ece_size15", "classwise_ece_size15", "classwise_ece"} <= set(names)
    boot = bootstrap_cell([fold], {m: metrics[m] for m in names}, 30, seed=4)
    indices = resample_indices(fold.y, 30, bootstrap.fold_rng(4, fold.y))
    for name in names:
        assert bootstrap._vectorised(fold, name, metrics[name]) or bootstrap._terms(
            fold, name, metrics[name]
        ), f"{name} fell back to the general path"
        expected = [bootstrap._subset(fold, i).scores({name: metrics[name]})[name] for i in indices]
        np.testing.assert_allclose(
            boot.replicates[name], expected, rtol=1e-11, atol=1e-13, err_msg=name
        )


@pytest.mark.parametrize("binning", ["equal_size", "equal_size_stable"])
def test_equal_scores_keep_the_folds_order_in_equal_size_bins(binning):
    """The documented tie-break of the vectorised equal-size bins: a resample's equal
    scores lie in the order the fold's own sort gave them (numpy 1.x's introsort for
    ``equal_size``, test-set order for ``equal_size_stable``), i.e. the metric on the
    resample gathered in that order, its ties then kept in place."""
    rng = np.random.default_rng(8)
    n, k = 300, 3
    probs = np.full((n, k), 0.2)
    probs[np.arange(n), rng.integers(0, k, n)] = 0.6  # three distinct rows only
    y = rng.integers(0, k, n)
    fold = FoldPredictions(0, y, probs, probs, 1 - np.eye(k))
    boot = bootstrap_cell([fold], {"classwise_ece": {"n_bins": 7, "binning": binning}}, 20, 1)
    indices = resample_indices(y, 20, bootstrap.fold_rng(1, y))
    expected = []
    for i in indices:
        per_class = []
        for j in range(k):
            position = np.empty(n, dtype=int)
            position[equal_size_order(probs[:, j], binning)] = np.arange(n)
            gathered = i[np.argsort(position[i], kind="stable")]
            scores, outcomes = probs[gathered, j], (y[gathered] == j).astype(float)
            per_class.append(_binned_error(scores, outcomes, 7, "equal_size_stable", 1))
        expected.append(np.mean(per_class))
    np.testing.assert_allclose(boot.replicates["classwise_ece"], expected, rtol=1e-12)


def test_a_fold_mean_is_resampled_fold_by_fold(rng):
    folds = [_fold(rng, n=400, index=i) for i in range(3)]
    boot = bootstrap_cell(folds, {"brier": {}, "classwise_ece": {}}, 40, seed=2)
    for name in ("brier", "classwise_ece"):
        per_fold = [
            [bootstrap._subset(f, i).scores({name: {}})[name] for i in _indices(f, 40, 2)]
            for f in folds
        ]
        np.testing.assert_allclose(boot.replicates[name], np.mean(per_fold, axis=0), rtol=1e-12)
        assert boot.estimate[name] == pytest.approx(
            np.mean([f.scores({name: {}})[name] for f in folds])
        )


def _indices(fold, n, seed):
    return resample_indices(fold.y, n, bootstrap.fold_rng(seed, fold.y))


@pytest.mark.slow  # 6 s
def test_intervals_cover_the_true_value_about_95_percent_of_the_time():
    """Valk's synthetic set knows its true calibration map: the uncalibrated predictions'
    population Brier score and true confidence CE (0.080) are known. 200 test sets of 1000
    points each: their 95% intervals must hold them about 95% of the time."""
    true_map = SyntheticTrueMap()
    big = np.random.default_rng(0).dirichlet([0.5] * 3, size=2_000_000)
    q = true_map(big)
    top = big.argmax(axis=1)
    rows = np.arange(len(big))
    truth = {
        "brier": float(((big**2).sum(axis=1) - 2 * (big * q).sum(axis=1) + 1).mean()),
        "true_confidence_ce": float(np.abs(big[rows, top] - q[rows, top]).mean()),
    }
    assert truth["true_confidence_ce"] == pytest.approx(0.080, abs=0.001)
    covered = dict.fromkeys(truth, 0)
    rng = np.random.default_rng(1)
    for _ in range(200):
        probs = rng.dirichlet([0.5] * 3, size=1000)
        y = sample_labels(true_map(probs), rng)
        fold = FoldPredictions(0, y, probs, probs, 1 - np.eye(3), true_probs=true_map(probs))
        boot = bootstrap_cell([fold], {m: {} for m in truth}, 1000, seed=int(rng.integers(1e9)))
        for metric, value in truth.items():
            low, high = boot.interval(metric)
            covered[metric] += low <= value <= high
    for metric, hits in covered.items():
        assert 0.90 <= hits / 200 <= 0.99, (metric, hits)


def test_the_recentred_interval_is_the_replicates_spread_around_the_estimate(rng):
    replicates = 0.3 + rng.gamma(2.0, 0.01, 500)  # biased upwards, as binned errors are
    got = interval(replicates, 0.3, 0.1, "recentred")
    shifted = replicates - replicates.mean() + 0.3
    np.testing.assert_allclose(got, np.quantile(shifted, [0.05, 0.95]), rtol=1e-14)
    assert got[0] < 0.3 < got[1] and interval(replicates, 0.3, 0.1)[0] > got[0]


def test_bad_settings_are_refused():
    with pytest.raises(CalbenchError, match="at least 2"):
        BootstrapSettings(resamples=1)
    with pytest.raises(CalbenchError, match=r"alpha must lie in \(0, 1\)"):
        BootstrapSettings(alpha=1.5)
    with pytest.raises(CalbenchError, match="percentile, bca"):
        BootstrapSettings(method="student")
    with pytest.raises(CalbenchError, match="BCa needs"):
        interval(np.arange(10.0), 4.5, method="bca")


@pytest.mark.slow  # 13 s
def test_tables_with_ci_show_each_cells_interval_and_mark_the_ties(tmp_path):
    import pandas as pd

    from calbench.results.store import ResultStore
    from calbench.runner.job import run_job
    from calbench.tables.write import write_tables
    from tests.runner.test_runner import plan

    for method in ("ts", "vs", "dir_l2"):
        run_job(plan(f"method={method}", "dataset.n_test=1500", f"results_dir={tmp_path}"))
    settings = BootstrapSettings(resamples=300, seed=3)
    write_tables(tmp_path, formats=("md", "csv"), echo=False, intervals=settings)
    table = pd.read_csv(tmp_path / "tables" / "default_log_loss.csv").dropna(subset=["lower"])
    assert set(table["column"]) == {"ts", "vs", "dir_l2"}
    # Reference: each cell's bootstrap drawn here, and the paired difference to the best.
    store = ResultStore(tmp_path)
    rows = store.read()
    boots = {}
    for method, cell in rows[rows["metric"] == "log_loss"].groupby("method"):
        h, sha = cell["config_hash"].iat[0], cell["predictions_sha256"].iat[0]
        boots[method] = bootstrap_cell(store.predictions(h, sha), {"log_loss": {}}, 300, seed=3)
    best = min(boots, key=lambda m: boots[m].estimate["log_loss"])
    for _, record in table.iterrows():
        boot = boots[record["column"]]
        assert (record["lower"], record["upper"]) == pytest.approx(boot.interval("log_loss"))
        difference = boot.replicates["log_loss"] - boots[best].replicates["log_loss"]
        low, high = np.quantile(difference, [0.025, 0.975])
        expected = record["column"] != best and low <= 0 <= high
        assert record["tied_with_best"] == expected
    markdown = (tmp_path / "tables" / "default_log_loss.md").read_text()
    assert "95% stratified bootstrap interval of the fold mean" in markdown and " [" in markdown
    cached = sorted((tmp_path / "store" / "bootstrap").iterdir())
    assert len(cached) == 3  # one file per cell; a second call draws nothing new
    write_tables(tmp_path, formats=("csv",), echo=False, intervals=settings)
    assert sorted((tmp_path / "store" / "bootstrap").iterdir()) == cached
    again = pd.read_csv(tmp_path / "tables" / "default_log_loss.csv").dropna(subset=["lower"])
    pd.testing.assert_frame_equal(again, table)
    # Any interval method applies to every metric (BCa alone falls back where it cannot).
    recentred = BootstrapSettings(resamples=300, seed=3, method="recentred")
    write_tables(tmp_path, formats=("csv",), echo=False, intervals=recentred)
    for metric in ("log_loss", "classwise_ece"):
        table = pd.read_csv(tmp_path / "tables" / f"default_{metric}.csv").dropna(subset=["lower"])
        for _, record in table.iterrows():
            cell = rows[(rows["metric"] == metric) & (rows["method"] == record["column"])]
            h, sha = cell["config_hash"].iat[0], cell["predictions_sha256"].iat[0]
            options = {metric: store.config(h)["metrics"][metric]}
            boot = bootstrap_cell(store.predictions(h, sha), options, 300, seed=3)
            expected = boot.interval(metric, method="recentred")
            assert (record["lower"], record["upper"]) == pytest.approx(expected)


def test_cells_sharing_predictions_keep_their_own_metric_options(tmp_path):
    """Equal predictions are stored once (uncal is the same in every preset), so two cells
    may share a bootstrap cache file; a metric defined differently in each (Kull sums
    classwise ECE over classes, Gupta averages) gets each cell's own interval."""
    from calbench.results.store import ResultStore
    from calbench.runner.job import run_job
    from calbench.stats.bootstrap import stored_bootstrap
    from tests.runner.test_runner import plan

    common = ("method=ts", "dataset.n_test=800", f"results_dir={tmp_path}")
    run_job(plan(*common))
    run_job(plan(*common, "metrics.classwise_ece.n_bins=5"))
    store = ResultStore(tmp_path)
    cells = store.read().drop_duplicates("config_hash")
    assert cells["predictions_sha256"].nunique() == 1 and len(cells) == 2
    settings = BootstrapSettings(resamples=50)
    for cell in cells.itertuples():
        got = stored_bootstrap(
            store, cell.config_hash, cell.predictions_sha256, ["classwise_ece"], settings
        )
        options = store.config(cell.config_hash)["metrics"]["classwise_ece"]
        expected = bootstrap_cell(
            store.predictions(cell.config_hash, cell.predictions_sha256),
            {"classwise_ece": options},
            50,
        )
        np.testing.assert_array_equal(
            got.replicates["classwise_ece"], expected.replicates["classwise_ece"]
        )
    assert len(list((tmp_path / "store" / "bootstrap").iterdir())) == 1


@pytest.mark.slow  # 5 s
def test_rank_only_experiments_get_their_tasks_intervals_in_the_generic_tables(
    tmp_path, monkeypatch
):
    """Kull's UCI tables rank tasks (no cell's value to resample): with --ci each task's
    values come in the generic tables, with intervals; a calibration test's decision (p_*)
    gets none, and the note says why."""
    import pandas as pd

    from calbench.runner.job import run_job
    from calbench.tables import write
    from tests.runner.test_runner import plan

    for method in ("uncal", "ts", "vs"):
        run_job(
            plan(
                f"method={method}",
                "dataset.n_test=600",
                f"results_dir={tmp_path}",
                "+metrics.p_cw_ece={fn: classwise_ece_accepted, n_resamples: 50}",
            )
        )
    ranks = {
        "name": "default_ranks",
        "experiment": "default",
        "layout": "ranks_by_group",
        "group_by": "classifier",
        "metric": "log_loss",
        "title": "ranks",
        "columns": {"uncal": "Uncal", "ts": "TS", "vs": "VS"},
        "rows": {"none": "none"},
        "decimals": 2,
    }
    monkeypatch.setattr(write, "table_specs", lambda: {"default_ranks": ranks})
    settings = BootstrapSettings(resamples=100)
    write.write_tables(tmp_path, formats=("md", "csv"), echo=False)
    assert not (tmp_path / "tables" / "default_log_loss.csv").exists()
    write.write_tables(tmp_path, formats=("md", "csv"), echo=False, intervals=settings)
    assert "No intervals" in (tmp_path / "tables" / "default_ranks.md").read_text()
    log_loss = pd.read_csv(tmp_path / "tables" / "default_log_loss.csv")
    assert log_loss.dropna(subset=["lower"])["column"].tolist() == ["uncal", "ts", "vs"]
    tests = pd.read_csv(tmp_path / "tables" / "default_p_cw_ece.csv")
    assert tests["lower"].isna().all() and tests["value"].notna().all()
    assert (
        "3 value(s) have no interval" in (tmp_path / "tables" / "default_p_cw_ece.md").read_text()
    )


def test_every_metric_declares_how_it_resamples():
    """A metric's author decides its resampled form: a mean of per-sample terms, a form on
    every resample at once, recomputed whole on each, or no interval; each metric in exactly
    one of them."""
    from calbench.metrics import METRICS
    from calbench.metrics.resampled import RECOMPUTED
    from calbench.stats.bootstrap import NOT_RESAMPLED

    kinds = [set(_PER_SAMPLE), set(_RESAMPLED), set(RECOMPUTED), set(NOT_RESAMPLED)]
    undeclared = sorted(set(METRICS) - set().union(*kinds))
    assert not undeclared, f"declare how these resample: {undeclared}"
    twice = [m for m in METRICS if sum(m in kind for kind in kinds) > 1]
    assert not twice
    assert set().union(*kinds) <= set(METRICS)
