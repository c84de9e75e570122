"""Figures render headless to non-empty files; CD diagrams from a store."""

import re

import numpy as np
import pandas as pd
import pytest

from calbench.errors import CalbenchError
from calbench.plots.simplex import to_plane
from calbench.plots.write import cd_figures
from calbench.results.store import COLUMNS, ResultStore
from calbench.simplex import simplex_grid
from tests.conftest import store_row


def test_simplex_geometry():
    grid = simplex_grid(0.1)
    assert np.allclose(grid.sum(axis=1), 1) and (grid > 0).all()
    np.testing.assert_allclose(to_plane(np.eye(3)), [[0, 0], [1, 0], [0.5, np.sqrt(3) / 2]])


def _store(tmp_path, datasets, methods, rng, metrics=("log_loss",), cell="cells"):
    rows = [
        {
            **store_row(),
            "dataset": d,
            "method": m,
            "metric": metric,
            "config_hash": d + m,
            "value": i + 1 + abs(rng.normal(0, 0.5)),
        }
        for d in datasets
        for i, m in enumerate(methods)
        for metric in metrics
    ]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    ResultStore(tmp_path).write(cell, frame)


def test_ece_variance_scatter_from_the_store(tmp_path, rng):
    from calbench.plots.write import ece_variance_figure

    _store(
        tmp_path,
        ["d0", "d1"],
        ["a", "b", "c"],
        rng,
        metrics=("confidence_ece", "confidence_variance"),
    )
    paths = ece_variance_figure("e", tmp_path, tmp_path / "figures", ["png"])
    assert len(paths) == 1 and paths[0].stat().st_size > 5_000


def test_cd_diagram_from_the_store(tmp_path, rng):
    _store(tmp_path, [f"d{i}" for i in range(8)], ["a", "b", "c", "d"], rng)
    paths = cd_figures("e", tmp_path, ["log_loss"], tmp_path / "figures", ["png"])
    assert len(paths) == 1 and paths[0].stat().st_size > 5_000
    # A task with one method only (`calbench run` beside a sweep) is left out, not an error.
    _store(tmp_path / "partial", ["d0"], ["a", "b", "c"], rng)
    _store(tmp_path / "partial", ["lone"], ["a"], rng, cell="lone")
    assert cd_figures("e", tmp_path / "partial", ["log_loss"], tmp_path / "f", ["png"]) == []
    with pytest.raises(CalbenchError, match="No experiment 'nothing' in .*; it stores e"):
        cd_figures("nothing", tmp_path, ["log_loss"], tmp_path / "figures", ["png"])


def test_kull_fig3bc_shares_of_folds_judged_calibrated(tmp_path):
    from calbench.plots.acceptance import acceptance_shares
    from calbench.plots.write import acceptance_figures

    # Two tasks x two methods x five folds of the 0/1 test outcome.
    outcome = {
        ("d0", "uncal"): [1, 0, 0, 0, 0],
        ("d0", "dir"): [1, 1, 1, 0, 1],
        ("d1", "uncal"): [0, 0, 1, 1, 0],
        ("d1", "dir"): [1, 1, 1, 1, 1],
    }
    rows = pd.DataFrame(
        [
            {
                "dataset": d,
                "classifier": c,
                "method": m,
                "fold": f,
                "metric": "p_cw_ece",
                "value": float(v),
            }
            for c in ("knn", "tree")
            for (d, m), values in outcome.items()
            for f, v in enumerate(values)
        ]
    )
    shares = acceptance_shares(rows, "p_cw_ece").set_index(["dataset", "classifier", "method"])
    assert shares.loc[("d0", "knn", "dir"), "value"] == pytest.approx(0.8)
    assert shares.loc[("d1", "tree", "uncal"), "value"] == pytest.approx(0.4)
    paths = acceptance_figures("e", rows, tmp_path, ["png"])
    assert [p.name for p in paths] == [
        "e_p_cw_ece_per_method.png",
        "e_p_cw_ece_uncal_per_classifier.png",
    ]


def test_figures_of_an_experiment_without_a_preset_come_from_the_store(tmp_path, rng):
    from calbench.plots.write import write_figures

    tasks = ["d0", "d1", "d2", "d3", "d4"]
    _store(tmp_path, tasks, ["a", "b", "c"], rng)  # experiment "e": no preset
    paths = write_figures("e", tmp_path, formats=["png"], metrics=["log_loss"])
    assert [p.name for p in paths] == ["e_cd_log_loss.png"]
    # under 5 tasks none, as the leaderboard draws none (the report showed one over 2)
    _store(tmp_path / "few", tasks[:3], ["a", "b", "c"], rng)
    assert cd_figures("e", tmp_path / "few", ["log_loss"], tmp_path / "f", ["png"]) == []


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # bins no resample fills
def test_reliability_bands_are_the_bins_bootstrap_intervals(rng):
    """Each bar's error bar spans the percentile interval of that bin's observed frequency
    over the resampled test sets (recomputed here bin by bin from the resamples)."""
    import matplotlib.pyplot as plt

    from calbench.metrics.binned import bin_statistics, top_label
    from calbench.plots.reliability import reliability_diagram
    from calbench.simplex import softmax
    from calbench.stats.bootstrap import BootstrapSettings, fold_rng, resample_indices

    y = rng.integers(0, 4, 600)
    z = 2.0 * rng.normal(size=(600, 4))
    z[np.arange(600), y] += 1.0
    probs = softmax(z)
    settings = BootstrapSettings(resamples=200, seed=3, alpha=0.1)
    fig, ax = plt.subplots()
    reliability_diagram(ax, probs, y, n_bins=10, bands=settings)
    (bars,) = [c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer"]
    segments = bars.lines[2][0].get_segments()
    scores, outcomes = top_label(probs, y)
    counts, _, observed = bin_statistics(scores, outcomes, 10, "equal_width")
    drawn = resample_indices(y, 200, fold_rng(3, y))
    with np.errstate(all="ignore"):  # a resample may leave a bin empty: NaN
        per_resample = np.array(
            [bin_statistics(scores[i], outcomes[i], 10, "equal_width")[2] for i in drawn]
        )
    lower, upper = np.nanquantile(per_resample, [0.05, 0.95], axis=0)
    filled = np.flatnonzero(counts > 0)
    assert len(segments) == len(filled) > 3
    for segment, b in zip(segments, filled, strict=True):
        assert segment[0, 0] == pytest.approx((b + 0.5) / 10)
        np.testing.assert_allclose(sorted(segment[:, 1]), [lower[b], upper[b]], atol=1e-12)
        assert lower[b] <= observed[b] <= upper[b]
    plt.close(fig)


@pytest.mark.slow  # 16 s
def test_figures_draw_every_named_method_and_say_which_they_leave_out(tmp_path, capsys):
    from calbench.plots.write import write_figures
    from calbench.runner.job import run_job
    from tests.runner.test_runner import plan

    methods = ["uncal", "ts", "vs", "dir_l2", "beta"]
    for method in methods:
        run_job(plan(f"method={method}", "dataset.n_test=300", f"results_dir={tmp_path}"))
    capsys.readouterr()
    with pytest.raises(CalbenchError, match=r"--methods: nosuch not stored .* its methods: beta"):
        write_figures("default", tmp_path, formats=["png"], methods=["ts", "nosuch"])
    write_figures("default", tmp_path, formats=["png"])
    from calbench.plots.write import leading_methods

    # By default the leaderboard's top three on log-loss, TS and uncal, on every task.
    leaders = leading_methods(ResultStore(tmp_path).read("default"))
    assert {"ts", "uncal"} <= set(leaders) and 3 <= len(leaders) <= 5
    out = capsys.readouterr().out
    if len(leaders) < len(methods):  # said once, not per task
        assert out.count(f"per-task reliability figures: {', '.join(leaders)} (") == 1
    paths = write_figures("default", tmp_path, formats=["png"], methods=methods)
    assert "left out" not in capsys.readouterr().out
    from matplotlib import image

    reliability = [p for p in paths if p.name == "default_reliability.png"][0]
    assert image.imread(reliability).shape[1] > 5 * 280  # five panels of 3 inches at 100 dpi


def test_reliability_panels_wrap_at_five_a_row_in_the_named_order(monkeypatch, rng):
    """Thirteen methods in one row were 3-cm panels whose bin counts overlapped: panels
    wrap at five methods a row (each method's confidence above its class-1 panel), in the
    order the user named them, and the figure's title says what is drawn."""
    from types import SimpleNamespace

    import calbench.plots.predictions as predictions

    figures = []
    monkeypatch.setattr(predictions, "save_figure", lambda fig, *a: figures.append(fig) or [])
    methods = ["vs", "ts", "uncal", "beta", "dir", "knn_kl", "spline"]
    probs = rng.dirichlet(np.ones(3), size=200)
    y = rng.integers(0, 3, 200)
    fold = SimpleNamespace(probs=probs, y=y)
    task = predictions.Task("d", "none", {m: [fold] for m in methods}, "h")
    shown, left_out = predictions.reliability_methods(task, chosen=True)
    assert shown == methods and left_out == []
    predictions.reliability_figures("e", task, None, ["png"], "e", shown=shown)
    reliability, smooth, ks = figures
    grid = reliability.axes[0].get_gridspec()
    assert (grid.nrows, grid.ncols) == (4, 5)
    titles = [ax.get_title() for ax in reliability.axes if ax.axison]
    assert titles[:5] == [f"{m}: confidence" for m in methods[:5]]
    assert titles[5:10] == [f"{m}: class 1" for m in methods[:5]]
    assert titles[10:] == ["knn_kl: confidence", "spline: confidence"] + [
        "knn_kl: class 1",
        "spline: class 1",
    ]
    assert sum(not ax.axison for ax in reliability.axes) == 6  # the last row's empty places
    assert "reliability diagrams" in reliability._suptitle.get_text()
    assert smooth.axes[0].get_gridspec().nrows == 2 and ks.axes[0].get_gridspec().nrows == 4


def test_ece_variance_ticks_do_not_run_into_each_other(rng):
    import matplotlib.pyplot as plt

    from calbench.plots.ks import ece_variance_scatter

    table = pd.DataFrame(
        {
            "method": [f"m{i}" for i in range(14)],
            "confidence_ece": rng.uniform(0.01, 0.05, 14),
            "confidence_variance": rng.uniform(0.006, 0.025, 14),
        }
    )
    fig, ax = plt.subplots(figsize=(5, 4))
    ece_variance_scatter(ax, table)
    fig.canvas.draw()
    assert len([t for t in ax.get_xticklabels() if t.get_text()]) <= 6
    # 14 methods: 14 distinct (colour, marker) pairs
    looks = {
        (tuple(c.get_facecolor()[0]), c.get_paths()[0].vertices.tobytes()) for c in ax.collections
    }
    assert len(looks) == 14
    plt.close(fig)


def test_the_scatter_says_which_network_each_point_is(rng):
    """Several data sets: a marker per network and a legend naming each (issue 59)."""
    import matplotlib.pyplot as plt

    from calbench.plots.ks import ece_variance_scatter

    table = pd.DataFrame(
        {
            "dataset": ["netA", "netA", "netB", "netB"],
            "method": ["ts", "vs", "ts", "vs"],
            "confidence_ece": rng.uniform(0.01, 0.05, 4),
            "confidence_variance": rng.uniform(0.006, 0.025, 4),
        }
    )
    fig, ax = plt.subplots()
    ece_variance_scatter(ax, table)
    shapes = [c.get_paths()[0].vertices.tobytes() for c in ax.collections]
    colours = [tuple(c.get_facecolor()[0]) for c in ax.collections]
    assert len(ax.collections) == 4
    assert shapes[0] == shapes[2] != shapes[1] == shapes[3]  # (ts, netA), (ts, netB), ...
    assert colours[0] == colours[1] != colours[2] == colours[3]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ts", "vs", "data sets:", "netA", "netB"]
    plt.close(fig)


def test_reliability_panels_print_their_ece_and_its_interval(rng):
    import matplotlib.pyplot as plt

    from calbench.metrics import confidence_ece
    from calbench.plots.reliability import reliability_diagram

    z = rng.normal(size=(3000, 5)) * 2
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (rng.random((3000, 1)) > probs.cumsum(axis=1)).sum(axis=1).clip(0, 4)
    fig, ax = plt.subplots()
    reliability_diagram(ax, probs, y)  # the default metric set's 15 equal-width bins
    text = next(t.get_text() for t in ax.texts if t.get_text().startswith("confidence_ece"))
    assert "15 equal-width bins" in text
    ece, low, high = (float(x) for x in re.findall(r"0\.[0-9]+", text))
    assert f"{ece:.4f}" == f"{confidence_ece(probs, y, n_bins=15, binning='equal_width'):.4f}"
    assert low <= ece <= high and "95% [" in text and "(recentred)" in text
    plt.close(fig)


def test_per_task_figures_show_the_leaders_ts_and_uncal_on_every_task():
    from calbench.plots.write import leading_methods

    values = {  # log-loss; mean ranks: sms 1, dir 2.5, ms 2.5, vs 4, ts 5, uncal 6
        "a": {"sms": 0.1, "dir": 0.2, "ms": 0.3, "vs": 0.4, "ts": 0.5, "uncal": 0.6},
        "b": {"sms": 0.1, "dir": 0.3, "ms": 0.2, "vs": 0.4, "ts": 0.5, "uncal": 0.6},
    }
    rows = pd.DataFrame(
        [
            store_row(dataset=d, method=m, metric="log_loss", value=v, config_hash=f"{d}{m}")
            for d, by_method in values.items()
            for m, v in by_method.items()
        ]
    )
    assert leading_methods(rows) == ["sms", "dir", "ms", "ts", "uncal"]


def test_class_panels_name_the_class_where_the_data_set_names_it(rng, tmp_path):
    """A user's npz with ``class_names``: the class panels say "cat", not "class 1"."""
    import matplotlib.pyplot as plt

    from calbench.plots.predictions import Task
    from calbench.plots.reliability import reliability_diagram

    y = rng.integers(0, 3, 300)
    np.savez(
        tmp_path / "pets.npz",
        logits=rng.normal(size=(300, 3)),
        y=y,
        class_names=np.array(["cat", "dog", "rabbit"]),
    )
    store = ResultStore(tmp_path)
    store.write_config(
        "abc", f"dataset:\n  name: pets\n  loader: npz\n  path: {tmp_path}/pets.npz\n"
    )
    task = Task("pets", "none", {}, "abc")
    assert task.class_names(store) == ["cat", "dog", "rabbit"]
    assert Task("pets", "none", {}, "missing").class_names(store) is None
    fig, ax = plt.subplots()
    probs = np.full((300, 3), 1 / 3)
    reliability_diagram(ax, probs, y, class_index=0, class_name="cat")
    assert ax.get_ylabel() == "frequency of cat" and ax.get_xlabel() == "predicted p(cat)"
    plt.close(fig)
