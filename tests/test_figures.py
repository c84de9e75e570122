"""Figures render headless to non-empty files; CD diagrams from a store."""

import numpy as np
import pandas as pd
import pytest

from calbench.errors import CalbenchError
from calbench.plots.simplex import to_plane
from calbench.plots.write import cd_figures
from calbench.runner.store import COLUMNS, ResultStore
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
    with pytest.raises(CalbenchError, match="run `calbench run experiment=nothing` first"):
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

    _store(tmp_path, ["d0", "d1", "d2"], ["a", "b", "c"], rng)  # experiment "e": no preset
    paths = write_figures("e", tmp_path, formats=["png"], metrics=["log_loss"])
    assert [p.name for p in paths] == ["e_cd_log_loss.png"]
