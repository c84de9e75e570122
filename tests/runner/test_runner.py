"""Protocols, inner-CV selection, the store and one cell, in-process."""

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_module

from calbench.calibrators import make_calibrator
from calbench.data import load_dataset
from calbench.errors import CalbenchError
from calbench.metrics import log_loss
from calbench.results.store import COLUMNS, ResultStore
from calbench.runner.cell import run_cell
from calbench.runner.job import run_job
from calbench.runner.plan import plan_cell
from calbench.runner.protocols import nested
from calbench.runner.selection import AveragedCalibrator, select_and_fit
from tests.conftest import overconfident_logits


def config(*overrides):
    with initialize_config_module("calbench.conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def plan(*overrides):
    """The plan of the composed config (every check of it run)."""
    return plan_cell(config(*overrides))


def test_inner_cv_picks_the_grid_point_with_lowest_out_of_fold_log_loss(rng):
    z, y = overconfident_logits(rng, 600, 4)
    grid = {"reg_lambda": [1e-4, 1e4]}
    model, chosen = select_and_fit(make_calibrator("dir_l2"), grid, z, y, inner_folds=3, seed=0)
    assert chosen in ({"reg_lambda": 1e-4}, {"reg_lambda": 1e4})
    # Reference: the same folds scored by hand.
    from sklearn.model_selection import StratifiedKFold

    scores = {}
    for lam in grid["reg_lambda"]:
        oof = np.empty((len(y), 4))
        for fit, held in StratifiedKFold(3, shuffle=True, random_state=0).split(z, y):
            oof[held] = (
                make_calibrator("dir_l2", reg_lambda=lam).fit(z[fit], y[fit]).predict_proba(z[held])
            )
        scores[lam] = log_loss(oof, y)
    assert chosen["reg_lambda"] == min(scores, key=scores.get)
    assert model.reg_lambda == chosen["reg_lambda"]


def test_grid_patience_stops_after_rows_without_a_better_point(rng, monkeypatch):
    """grid_patience visits reg_lambda from the strongest down and stops after that many
    rows brought no better CV score: it fits fewer models, and its choice is the full
    search's over the rows it visited."""
    from calbench.calibrators.matrix.matrix_scaling import MatrixScaling

    z, y = overconfident_logits(rng, 400, 4)
    grid = {"reg_lambda": [1e-3, 1.0, 1e3, 1e6], "reg_mu": [1e-2, 1e2]}
    fits = []
    fit = MatrixScaling.fit
    monkeypatch.setattr(
        MatrixScaling, "fit", lambda self, *a: fits.append(self.reg_lambda) or fit(self, *a)
    )
    full, full_params = select_and_fit(make_calibrator("ms_odir"), grid, z, y, inner_folds=3)
    n_full, fits[:] = len(fits), []
    early, params = select_and_fit(
        make_calibrator("ms_odir"), grid, z, y, inner_folds=3, grid_patience=1
    )
    visited = sorted(set(fits[:-1]), reverse=True)  # the last fit is the refit
    assert n_full == 4 * 2 * 3 + 1 and len(fits) < n_full
    assert visited == sorted(grid["reg_lambda"], reverse=True)[: len(visited)]
    _, expected = select_and_fit(
        make_calibrator("ms_odir"), {**grid, "reg_lambda": visited}, z, y, inner_folds=3
    )
    assert params == expected
    # Patience 1 stops at the first row without a better point: the one before it held
    # the best so far, so the visited rows are the best row and one more.
    assert params["reg_lambda"] == visited[-2]


def test_kfold_inner_cv_uses_the_papers_plain_shuffled_folds(rng):
    """inner_cv="kfold": sklearn's KFold(shuffle=True, random_state=seed) as Valk's and
    Kull's deep-net code split, so with their seed the averaged models are their folds'."""
    from sklearn.model_selection import KFold

    z, y = overconfident_logits(rng, 300, 3)
    model, _ = select_and_fit(
        make_calibrator("ts"),
        {},
        z,
        y,
        inner_folds=5,
        average_inner_models=True,
        seed=15,
        inner_cv="kfold",
    )
    splits = KFold(5, shuffle=True, random_state=15).split(z)
    for member, (fit, _) in zip(model.members, splits, strict=True):
        ref = make_calibrator("ts").fit(z[fit], y[fit])
        assert member.log_temperature_ == pytest.approx(ref.log_temperature_, abs=1e-9)
    with pytest.raises(CalbenchError, match="'inner_cv' parameter of protocol"):
        select_and_fit(make_calibrator("ts"), {}, z, y, average_inner_models=True, inner_cv="x")


def test_averaged_inner_models(rng):
    z, y = overconfident_logits(rng, 300, 3)
    model, _ = select_and_fit(
        make_calibrator("ts"), {}, z, y, inner_folds=3, average_inner_models=True
    )
    assert isinstance(model, AveragedCalibrator) and len(model.members) == 3
    expected = np.mean([m.predict_proba(z) for m in model.members], axis=0)
    np.testing.assert_allclose(model.predict_proba(z), expected)


def test_rare_class_is_reported_before_cv(rng):
    z, y = overconfident_logits(rng, 100, 3)
    y[y == 2] = 0
    y[:2] = 2
    with pytest.raises(CalbenchError, match="class 2 has 2 sample\\(s\\), fewer than the 5 folds"):
        select_and_fit(make_calibrator("dir_l2"), {"reg_lambda": [1, 2]}, z, y, inner_folds=5)


def test_a_class_absent_from_the_labels_is_no_fold_count_problem(rng):
    """Lowering the folds, the old error's fix, could not bring an absent class back; the
    folds stratify the classes present and the cell counts the absent one."""
    z, y = overconfident_logits(rng, 300, 3)
    y[y == 2] = 0
    model, chosen = select_and_fit(
        make_calibrator("dir_l2"), {"reg_lambda": [1e-3, 1.0]}, z, y, inner_folds=5
    )
    assert chosen["reg_lambda"] in (1e-3, 1.0) and model.predict_proba(z).shape == (300, 3)


def test_nested_folds_partition_the_pooled_data_stratified():
    ds = load_dataset("synthetic_dirichlet", seed=0, n_cal=500, n_test=1000)
    folds = list(nested(ds, outer_folds=5, seed=3))
    assert len(folds) == 5
    sizes = [len(f.y_eval) for f in folds]
    assert sum(sizes) == 1500 and max(sizes) - min(sizes) <= 1
    pooled = np.bincount(np.concatenate([ds.y_cal, ds.y_test]), minlength=3) / 1500
    for f in folds:
        share = np.bincount(f.y_eval, minlength=3) / len(f.y_eval)
        np.testing.assert_allclose(share, pooled, atol=0.01)


def test_cell_rows_are_tidy_and_reproducible():
    cell = plan("dataset.n_test=3000", "method=vs", "protocol=nested", "protocol.outer_folds=3")
    a, b = run_cell(cell), run_cell(cell)
    assert set(COLUMNS) - {"config_hash", "predictions_sha256"} <= set(a.columns)
    assert sorted(a["fold"].unique()) == [0, 1, 2]
    assert set(a["metric"]) >= {"accuracy", "log_loss", "true_confidence_ce", "average_loss_gap"}
    pd.testing.assert_series_equal(a["value"], b["value"])


def test_true_map_cell_scores_zero_true_error():
    rows = run_cell(plan("dataset.n_test=3000", "method=true_map"))
    values = rows.set_index("metric")["value"]
    assert values["true_confidence_ce"] == 0 and values["true_classwise_ce"] == 0


def test_job_skips_stored_cells_unless_forced(tmp_path, capsys):
    cfg = config("dataset.n_test=2000", f"results_dir={tmp_path}")
    h = run_job(plan_cell(cfg))
    store = ResultStore(tmp_path)
    first = store.read()
    assert store.has(h) and len(first) == first["metric"].nunique()
    run_job(plan_cell(cfg))
    assert "already in the store" in capsys.readouterr().out
    cfg.force = True
    run_job(plan_cell(cfg))
    assert len(store.read()) == len(first)
    assert not list((tmp_path / "store").glob("*.tmp"))


def test_grid_with_unknown_parameter_is_rejected():
    cfg = config("dataset.n_test=2000", "method=dir_l2", "+method.grid.alpha=[1,2]")
    with pytest.raises(CalbenchError, match="unknown parameter\\(s\\) \\['alpha'\\]"):
        plan_cell(cfg)


def test_a_newer_cell_with_the_same_labels_supersedes_the_older_in_reads(tmp_path):
    import os

    import yaml

    store = ResultStore(tmp_path)
    base = {c: "x" for c in COLUMNS}
    base.update(fold=0, metric="log_loss", seed=0, fit_seconds=0.0)

    def cell(hash_, value, grid, loss_cost=1, method="x"):
        config = {"method": {"grid": grid}, "loss": {"cost": loss_cost}, "seed": 0}
        rows = pd.DataFrame([dict(base, method=method, value=value, config_hash=hash_)])
        store.write(hash_, rows, yaml.safe_dump(config))

    cell("aaaa", 1.0, [1, 2])  # the method's grid edited between two runs: ...
    cell("bbbb", 2.0, [1, 2, 3])  # ... the newer cell replaces the older
    cell("cccc", 3.0, [1, 2], loss_cost=5)  # a sweep over the loss: kept beside them
    cell("dddd", 4.0, [1, 2], method="y")
    old = tmp_path / "store" / "aaaa.csv"
    os.utime(old, (old.stat().st_mtime - 100, old.stat().st_mtime - 100))
    assert sorted(store.read()["value"]) == [2.0, 3.0, 4.0]
    assert sorted(store.read(latest=False)["value"]) == [1.0, 2.0, 3.0, 4.0]


def test_store_reads_cells_of_old_and_new_layouts_row_for_row(tmp_path):
    import os

    import pandas as pd

    from calbench.results.store import COLUMNS, ResultStore

    def cell(name, n, **labels):
        rows = {c: "x" for c in COLUMNS} | labels
        frame = pd.DataFrame([rows] * n).assign(fold=range(n), value=[0.5 + i for i in range(n)])
        return frame.assign(config_hash=name, params='{"a": [1, 2]}')

    store = ResultStore(tmp_path)
    store.write("new1", cell("new1", 3, classifier="nbayes"))
    store.write("new2", cell("new2", 2, classifier="tree"))
    old = cell("old", 4).drop(columns="classifier")  # a cell stored before the column
    (tmp_path / "store" / "old.csv").write_text(old.to_csv(index=False))
    os.utime(tmp_path / "store" / "old.csv", (1_000_000, 1_000_000))
    frame = ResultStore(tmp_path).read(latest=False).sort_values(["config_hash", "fold"])
    assert frame.groupby("config_hash").size().to_dict() == {"new1": 3, "new2": 2, "old": 4}
    by_cell = frame.groupby("config_hash")
    assert by_cell["classifier"].unique().map(list).to_dict() == {
        "new1": ["nbayes"], "new2": ["tree"], "old": ["none"],
    }  # fmt: skip
    assert by_cell["written"].unique().map(len).eq(1).all()
    assert frame.loc[frame["config_hash"] == "old", "written"].iat[0] == 1_000_000
    assert frame.loc[frame["config_hash"] == "old", "value"].tolist() == [0.5, 1.5, 2.5, 3.5]
    assert (frame["params"] == '{"a": [1, 2]}').all()  # quoted commas survive the merge


def test_a_composition_with_a_grid_is_searched_and_its_steps_are_not_warm_started(rng):
    from calbench.runner.selection import select_on_validation

    z, y = overconfident_logits(rng, 400, 3)
    chain = make_calibrator("compose", first="ts", second="knn_kl")
    grid = {"second__n_neighbors": [16, 64]}
    model, chosen = select_and_fit(chain, grid, z, y, inner_folds=3, seed=0)
    assert chosen["second__n_neighbors"] in (16, 64)
    assert np.allclose(model.predict_proba(z).sum(axis=1), 1)
    model, chosen = select_on_validation(chain, grid, z[:200], y[:200], z[200:], y[200:])
    assert chosen["second__n_neighbors"] in (16, 64)


@pytest.mark.parametrize("estimate", ["em", "bbse", "uncorrected"])
def test_estimated_prior_shift_configs_extend_their_base(estimate):
    """lt_k1_em etc. are lt_k1 (through Hydra defaults) plus `estimate`, so a change to
    the base reaches them and the base's own cells keep their hashes."""
    base = config("shift=lt_k1").shift
    shift = config(f"shift=lt_k1_{estimate}").shift
    assert shift.name == f"lt_k1_{estimate}"
    assert shift.estimate == {"uncorrected": "none"}.get(estimate, estimate)
    assert {k: v for k, v in shift.items() if k not in ("name", "estimate")} == {
        k: v for k, v in base.items() if k != "name"
    }
    assert "estimate" not in base


def test_a_cells_rows_are_written_as_pandas_writes_them():
    """`csv_text` (the store's fast writer) gives pandas' `to_csv` text byte for byte:
    JSON params with commas and quotes, tiny and huge floats, a missing value, ints."""
    import pandas as pd

    from calbench.results.store import csv_text

    frame = pd.DataFrame(
        {
            "metric": ["log_loss", "ece, 15 bins", 'say "x"'],
            "value": [0.1, 1e-05, float("nan")],
            "fit_seconds": [1.2345678901234567, 3e20, 0.0],
            "params": ['{"a": 1, "b": [1, 2]}', "{}", '{"c": "x,y"}'],
            "fold": [0, 1, 2],
        }
    )
    columns = ["fold", "metric", "value", "fit_seconds", "params"]
    assert csv_text(frame, columns) == frame[columns].to_csv(index=False)
    # A cell's constant columns (its hash, its predictions' checksum), given apart:
    constants = {"config_hash": "0a1b", "predictions_sha256": "12e4"}
    with_constants = [*columns, *constants]
    expected = frame.assign(**constants)[with_constants].to_csv(index=False)
    assert csv_text(frame, with_constants, **constants) == expected


def test_holdout_selecting_on_the_test_set_keeps_the_prefix_with_the_lowest_test_brier(rng):
    """Valk's TS+DEC choice, reproduced only (protocol holdout_test_selected): the grid of a
    prefix parameter fitted once, each prefix scored by its Brier on the test part."""
    from calbench.data import Dataset
    from calbench.metrics import brier
    from calbench.runner.protocols import Protocol
    from calbench.runner.selection import select_on_validation

    z, y = overconfident_logits(rng, 600, 3)
    data = Dataset("toy", z[:300], y[:300], z[300:], y[300:])
    options = {"name": "holdout", "inner_folds": 10, "average_inner_models": False}
    (fold,) = Protocol.of({**options, "select_on": "test_brier"}).folds(data)
    (member,) = fold.members
    assert member.select_by == "brier" and member.logits_val is data.logits_test
    dec = make_calibrator("dec", n_steps=20, random_state=1)
    grid = {"n_iterations": [1, 2, 3, 4]}
    model, chosen = select_on_validation(
        dec, grid, member.logits_fit, member.y_fit, member.logits_val, member.y_val, score=brier
    )
    separate = [
        brier(make_calibrator("dec", n_steps=20, random_state=1, n_iterations=i)
              .fit(z[:300], y[:300]).predict_proba(z[300:]), y[300:])
        for i in grid["n_iterations"]
    ]  # fmt: skip
    assert len(set(np.round(separate, 12))) == 4
    assert chosen == {"n_iterations": grid["n_iterations"][int(np.argmin(separate))]}
    assert brier(model.predict_proba(z[300:]), y[300:]) == pytest.approx(min(separate), abs=1e-12)
    (plain,) = Protocol.of(options).folds(data)
    assert plain.members[0].logits_val is None
    with pytest.raises(CalbenchError, match="select_on.*inner_cv.*test_brier"):
        list(Protocol.of({**options, "select_on": "test"}).folds(data))
