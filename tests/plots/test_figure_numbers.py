"""What the per-task figures draw and print is what the data and the tables say: the smoothed
reliability curve only where confidences were observed, the reliability panels' ECE and the
KS graphs' error the tables' numbers (same metric, same bins, same fold mean, 4 decimals),
and a class named once."""

import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from calbench.metrics import confidence_ece, ks_error, smooth_ece
from calbench.simplex import softmax


def _four_class_scores(rng, n=1500):
    """A 4-class model's scores, somewhat overconfident: every top-label confidence is
    at least 1/4, the lowest ones well above it (as the tour's model_a)."""
    y = rng.integers(0, 4, n)
    z = 1.5 * rng.normal(size=(n, 4))
    z[np.arange(n), y] += 1.5
    return softmax(1.4 * z), y


def _drawn_line(ax) -> np.ndarray:
    """The smoothed accuracy's drawn points, (m, 2): every segment's ends."""
    (line,) = [c for c in ax.collections if c.__class__.__name__ == "LineCollection"]
    return np.concatenate(line.get_segments())


def test_the_smoothed_curve_is_drawn_only_over_the_observed_confidences(rng):
    """The tour's model_a showed a smoothed accuracy of ~0.8 at a confidence of 0.15, where
    a 4-class model has no confidence: beyond the observed range the kernel average is the
    outermost rows' outcomes extrapolated. The line now starts at the smallest observed
    confidence and ends at the largest; smECE, the metric, is unchanged."""
    from calbench.plots.reliability import smooth_reliability_diagram, smoothed_line

    probs, y = _four_class_scores(rng)
    confidence = probs.max(axis=1)
    fig, ax = plt.subplots()
    smooth_reliability_diagram(ax, probs, y, title="m")
    points = _drawn_line(ax)
    assert points[:, 0].min() == pytest.approx(confidence.min())
    assert points[:, 0].max() == pytest.approx(confidence.max())
    assert confidence.min() > 0.25 and (points[:, 0] >= 0.25).all()
    assert ((points[:, 1] >= 0) & (points[:, 1] <= 1)).all()
    # The kernel's curve over all of [0, 1] does reach below the data (the defect).
    curve = smoothed_line(probs, y)
    assert curve["mesh"].min() < confidence.min() and curve["t"].min() == confidence.min()
    # The density is shaded only where confidences can be, and below 1/k is marked as empty.
    (shade,) = [c for c in ax.collections if c.get_label() == "density of confidences"]
    assert shade.get_paths()[0].vertices[:, 0].min() >= 0.25
    assert any("confidence < 1/k (k=4)" in p.get_label() for p in ax.patches)
    smece = float(re.search(r"smECE ([0-9.]+)", ax.get_title()).group(1))
    assert smece == pytest.approx(smooth_ece(probs, y), abs=5e-5)
    plt.close(fig)


def test_the_smoothed_curve_breaks_where_the_floor_would_make_it(rng):
    """Two clusters of confidences far apart: between them the kernel's summed weight falls
    below `NEGLIGIBLE_WEIGHT`, where relplot's 1e-4 density floor would pull the accuracy
    towards 0; the line breaks there instead of dipping."""
    from calbench.plots.reliability import NEGLIGIBLE_WEIGHT, smoothed_line

    n = 400
    low, high = [0.4, 0.35, 0.25], [0.97, 0.02, 0.01]
    probs = np.repeat([low, high], n, axis=0)
    y = np.concatenate([rng.choice(3, n, p=low), rng.choice(3, n, p=high)])
    curve = smoothed_line(probs, y, bandwidth=0.01)
    gap = (curve["t"] > 0.5) & (curve["t"] < 0.9)
    assert np.isnan(curve["line"][gap]).all()
    assert (curve["line_density"][gap] * len(y) < NEGLIGIBLE_WEIGHT).all()
    assert not np.isnan(curve["line"][[0, -1]]).any()


def test_the_reliability_panel_prints_the_tables_confidence_ece(rng):
    """The panel's number is `confidence_ece` with the table's options (15 equal-width bins)
    and says so; over several folds, the mean of the folds' values, as the tables print it,
    not the ECE of the pooled rows."""
    from calbench.plots.reliability import reliability_diagram

    probs, y = _four_class_scores(rng, 1800)
    sizes = [600, 500, 700]
    bounds = np.cumsum([0, *sizes])
    folds = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    table = np.mean([confidence_ece(probs[f], y[f], n_bins=15) for f in folds])
    pooled = confidence_ece(probs, y, n_bins=15)
    assert f"{table:.4f}" != f"{pooled:.4f}"  # the check below tells the two apart
    fig, ax = plt.subplots()
    reliability_diagram(ax, probs, y, n_bins=15, fold_sizes=sizes)
    (text,) = [t.get_text() for t in ax.texts if t.get_text().startswith("confidence_ece")]
    assert text.splitlines()[0] == f"confidence_ece {table:.4f}"
    assert text.splitlines()[1] == "15 equal-width bins, mean of 3 folds"
    low, high = map(float, re.findall(r"[0-9]+\.[0-9]+", text.splitlines()[2]))
    assert low <= table <= high
    plt.close(fig)


def test_the_ks_graph_prints_the_tables_ks_error(rng):
    """A fraction to 4 decimals under the metric's name (not "0.44%"), the folds' mean."""
    from calbench.plots.ks import ks_curves

    probs, y = _four_class_scores(rng, 1200)
    sizes = [400, 800]
    table = np.mean([ks_error(probs[:400], y[:400]), ks_error(probs[400:], y[400:])])
    fig, (top, bottom) = plt.subplots(2)
    assert ks_curves(top, bottom, probs, y, "m", fold_sizes=sizes) == pytest.approx(table)
    assert top.get_title().splitlines() == [
        f"m: ks_error {table:.4f}",
        "(mean of 2 folds; curves pooled)",
    ]
    ks_curves(top, bottom, probs, y, "m")
    assert top.get_title() == f"m: ks_error {ks_error(probs, y):.4f}" and "%" not in top.get_title()
    plt.close(fig)


def test_the_figures_bins_follow_the_stored_metric_set():
    from calbench.plots.predictions import table_measures

    assert table_measures(None) == {
        "n_bins": 15,
        "ece_name": "confidence_ece",
        "ks": {"mode": "top", "r": 1},
    }
    stored = {
        "confidence_ece": {"n_bins": 20, "binning": "equal_width"},
        "ks_error": {"mode": "within_top", "r": 2},
    }
    assert table_measures(stored) == {
        "n_bins": 20,
        "ece_name": "confidence_ece",
        "ks": {"mode": "within_top", "r": 2},
    }
    # Equal-size bins cannot be drawn as these bars: the panel's ECE is then not the table's.
    other = table_measures({"confidence_ece": {"n_bins": 15, "binning": "equal_size"}})
    assert other["ece_name"] == "ECE" and other["n_bins"] == 15


def test_a_class_named_as_its_default_is_named_once(monkeypatch, rng):
    """The synthetic data's classes are called "class 1", "class 2", ...: its panels said
    "class 1 (class 1)"."""
    from types import SimpleNamespace

    import calbench.plots.predictions as predictions

    assert predictions.class_label("class 1") == "class 1"
    assert predictions.class_label(None) == "class 1"
    assert predictions.class_label("cat") == "class 1 (cat)"
    figures = []
    monkeypatch.setattr(predictions, "save_figure", lambda fig, *a: figures.append(fig) or [])
    fold = SimpleNamespace(probs=rng.dirichlet(np.ones(3), size=200), y=rng.integers(0, 3, 200))
    task = predictions.Task("d", "none", {"ts": [fold]}, "h")
    predictions.reliability_figures("e", task, None, ["png"], "e", first_class="class 1")
    reliability = figures[0]
    titles = [ax.get_title() for ax in reliability.axes] + [reliability._suptitle.get_text()]
    assert not any("class 1 (class 1)" in t for t in titles)
    assert "ts: class 1" in titles
    for fig in figures:
        plt.close(fig)


# The simplex figure's colour key has axes of its own, outside tight_layout's grid.
@pytest.mark.filterwarnings("ignore:This figure includes Axes that are not compatible")
@pytest.mark.parametrize(
    "cells, folds",
    [
        ([("ts", "protocol=nested"), ("vs", "protocol=nested")], 5),
        # a sweep over data seeds: one table row per method, the mean of its cells (the
        # figures drew each method's first cell alone: seed 4's ECE beside seed 0's)
        ([(m, f"dataset.seed={s}") for m in ("ts", "vs") for s in (0, 1, 2)], 3),
    ],
    ids=["nested", "seeds"],
)
def test_the_figures_numbers_are_the_tables(tmp_path, monkeypatch, capsys, cells, folds):
    """End to end (3 s: cells on 3,000 rows): the reliability panels' confidence_ece and
    the KS graphs' ks_error equal the stored fold means (what `calbench tables` prints) to
    4 decimals."""
    import calbench.plots.predictions as predictions
    from calbench.plots.write import write_figures
    from calbench.results.store import ResultStore
    from calbench.runner.job import run_job
    from tests.runner.test_runner import plan

    for method, setting in cells:
        run_job(
            plan(
                f"method={method}",
                setting,
                "dataset.n_cal=1500",
                "dataset.n_test=1500",
                f"results_dir={tmp_path}",
            )
        )
    capsys.readouterr()
    figures = {}
    monkeypatch.setattr(
        predictions, "save_figure", lambda fig, d, name, f: figures.update({name: fig}) or []
    )
    write_figures("default", tmp_path, formats=["png"])
    rows = ResultStore(tmp_path).read("default")
    table = rows.groupby(["method", "metric"])["value"].mean()
    printed = {}
    for ax in figures["default_reliability"].axes:
        for text in ax.texts:
            if text.get_text().startswith("confidence_ece"):
                printed[(ax.get_title().split(":")[0], "confidence_ece")] = text.get_text()
    for ax in figures["default_ks_curves"].axes:
        if "ks_error" in ax.get_title():
            printed[(ax.get_title().split(":")[0], "ks_error")] = ax.get_title()
    assert len(printed) == 4
    for (method, metric), text in printed.items():
        assert f"{metric} {table[(method, metric)]:.4f}" in text
        assert f"mean of {folds} folds" in text


def test_a_metric_set_without_confidence_ece_labels_the_panel_ece():
    """Gupta's set prints confidence_ece_25: a panel labelled confidence_ece named a number
    no table of the task printed (the review of 2026-11-29)."""
    from calbench.plots.predictions import table_measures

    assert table_measures(None)["ece_name"] == "confidence_ece"
    assert table_measures({"confidence_ece": {"n_bins": 10}})["n_bins"] == 10
    assert table_measures({"confidence_ece_25": {"n_bins": 25}})["ece_name"] == "ECE"
