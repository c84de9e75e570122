"""Stored per-fold predictions: they reproduce the stored rows, are checked, and feed
`calbench rescore` and the figures without a refit."""

import hashlib
import os

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.metrics import confidence_ece, mce
from calbench.results.store import ResultStore
from calbench.runner.job import run_job
from calbench.runner.rescore import metric_options, rescore
from calbench.yaml_text import load_yaml
from tests.runner.test_runner import plan

SMALL = ["dataset.n_cal=600", "dataset.n_test=900"]


def _cells(results_dir):
    store = ResultStore(results_dir)
    rows = store.read()
    return store, rows, rows.drop_duplicates("config_hash")


@pytest.mark.parametrize(
    "overrides",
    [
        ["method=dir_l2"],  # holdout, grid by inner CV, the true map known
        ["method=ts", "protocol=nested", "protocol.outer_folds=3", "protocol.inner_folds=2"],
        ["method=vs", "shift=lt_stronger"],  # Bayes-corrected, importance-weighted risks
        ["method=bcts", "shift=lt_stronger_bbse"],  # corrected to a BBSE-estimated prior
    ],
    ids=["holdout", "nested", "prior_shift", "estimated_prior"],
)
def test_stored_predictions_score_exactly_to_the_stored_rows(tmp_path, overrides):
    run_job(plan(*SMALL, *overrides, f"results_dir={tmp_path}"))
    store, rows, cells = _cells(tmp_path)
    cell = cells.iloc[0]
    metrics = load_yaml((tmp_path / "store" / f"{cell.config_hash}.yaml").read_text())["metrics"]
    folds = store.predictions(cell.config_hash, cell.predictions_sha256)
    assert [f.fold for f in folds] == sorted(rows["fold"].unique())
    for fold in folds:
        assert fold.simplex.shape == (7231, 3)  # 3-class data: the map for simplex figures
        stored = rows[rows["fold"] == fold.fold].set_index("metric")["value"]
        for metric, value in fold.scores(metrics).items():
            assert value == pytest.approx(stored[metric], rel=1e-12, abs=1e-15), metric
    if "shift=lt_stronger" in overrides:
        assert folds[0].prior_train is not None and folds[0].prior_test is not None
    if "shift=lt_stronger_bbse" in overrides:  # stored, and not the true test prior
        assert np.abs(folds[0].prior_estimated - folds[0].prior_test).max() > 1e-6
        assert folds[0].prior_estimated.sum() == pytest.approx(1.0)


def test_labels_and_uncalibrated_scores_are_stored_once_for_all_methods(tmp_path):
    for method in ("ts", "vs", "uncal"):
        run_job(plan(*SMALL, f"method={method}", f"results_dir={tmp_path}"))
    # y, uncalibrated and true probabilities of the one test set: one shared file, not 3.
    shared = list((tmp_path / "store" / "arrays").glob("*.npz"))
    assert len(shared) == 1
    with np.load(shared[0]) as arrays:
        assert sorted(arrays.files) == ["true_probs", "uncalibrated", "y"]
    store, _, cells = _cells(tmp_path)
    uncal = cells[cells["method"] == "uncal"].iloc[0]
    fold = store.predictions(uncal.config_hash, uncal.predictions_sha256)[0]
    np.testing.assert_array_equal(fold.probs, fold.uncalibrated)


def test_a_store_with_one_shared_file_per_array_is_still_read(tmp_path):
    """Stores written before the fold's shared arrays went into one file name each array
    (``@y/0``) and hash it alone: sha256 of dtype, shape and bytes."""
    from calbench.results import predictions

    rng = np.random.default_rng(0)
    y, uncal = rng.integers(0, 3, 20), rng.dirichlet(np.ones(3), 20)
    probs, loss = rng.dirichlet(np.ones(3), 20), 1 - np.eye(3)
    cell = {"probs/0": probs, "loss/0": loss}
    for name, array in (("y", y), ("uncalibrated", uncal)):
        digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
        content = digest.hexdigest()
        (tmp_path / "arrays").mkdir(exist_ok=True)
        np.savez(tmp_path / "arrays" / f"{content}.npz", array=array)
        cell[f"@{name}/0"] = np.array(content)
    np.savez(tmp_path / "old.npz", **cell)
    sha256 = hashlib.sha256((tmp_path / "old.npz").read_bytes()).hexdigest()
    (fold,) = predictions.read(tmp_path, "old", sha256)
    np.testing.assert_array_equal(fold.y, y)
    np.testing.assert_array_equal(fold.uncalibrated, uncal)
    np.testing.assert_array_equal(fold.probs, probs)
    assert fold.true_probs is None


def test_a_changed_or_missing_predictions_file_is_one_clear_error(tmp_path):
    run_job(plan(*SMALL, f"results_dir={tmp_path}"))
    store, _, cells = _cells(tmp_path)
    cell = cells.iloc[0]
    npz = tmp_path / "store" / f"{cell.config_hash}.npz"
    data = bytearray(npz.read_bytes())
    data[-10] ^= 0xFF
    npz.write_bytes(bytes(data))
    with pytest.raises(CalbenchError, match="does not match the checksum"):
        store.predictions(cell.config_hash, cell.predictions_sha256)
    npz.unlink()
    with pytest.raises(CalbenchError, match="missing although"):
        store.predictions(cell.config_hash, cell.predictions_sha256)


def test_float32_and_none_storage(tmp_path):
    run_job(plan(*SMALL, "predictions=float32", f"results_dir={tmp_path}"))
    store, rows, cells = _cells(tmp_path)
    cell = cells.iloc[0]
    fold = store.predictions(cell.config_hash, cell.predictions_sha256)[0]
    stored = rows.set_index("metric")["value"]
    assert fold.probs.dtype == np.float64  # read back as float64
    assert fold.scores({"log_loss": {}})["log_loss"] == pytest.approx(stored["log_loss"], rel=1e-6)
    run_job(plan(*SMALL, "method=vs", "predictions=none", f"results_dir={tmp_path / 'n'}"))
    store, _, cells = _cells(tmp_path / "n")
    assert cells["predictions_sha256"].iat[0] == ""
    with pytest.raises(CalbenchError, match="stored without predictions"):
        store.predictions(cells["config_hash"].iat[0], "")
    with pytest.raises(CalbenchError, match="predictions='npz'"):
        run_job(plan(*SMALL, "predictions=npz", f"results_dir={tmp_path / 'bad'}"))


def test_rescore_reaches_cells_a_later_setting_superseded(tmp_path):
    """Two runs of one method differing only in a setting (as a procedure's seeds do): the
    tables read the newer, a procedure's spread reads both, so both are rescored."""
    for tol in ("1e-6", "1e-8"):
        run_job(plan(*SMALL, "method=ts", f"+method.params.tol={tol}", f"results_dir={tmp_path}"))
    store = ResultStore(tmp_path)
    latest = store.read()["config_hash"].unique()
    assert len(latest) == 1
    # Rescoring rewrites both files, the newer last or first: the time each cell was run
    # is its rows' own (stored_at), which neither that nor touching the files changes.
    run_at = store.read(latest=False).groupby("config_hash")["stored_at"].first().to_dict()
    for cell in run_at:
        os.utime(tmp_path / "store" / f"{cell}.csv", (1.7e9, 1.7e9))
    assert rescore(tmp_path, {"conf_ece_20": {"fn": "confidence_ece", "n_bins": 20}}) == (2, [])
    rows = store.read(latest=False)
    assert (rows["metric"] == "conf_ece_20").sum() == 2
    assert list(store.read()["config_hash"].unique()) == list(latest)  # still the newer one
    assert rows.groupby("config_hash")["stored_at"].first().to_dict() == run_at


def test_rescore_adds_a_metric_from_stored_predictions_without_refitting(tmp_path, monkeypatch):
    for method in ("ts", "dir"):
        run_job(plan(*SMALL, f"method={method}", "protocol=nested", f"results_dir={tmp_path}"))
    store, before, _ = _cells(tmp_path)

    def no_refit(*args, **kwargs):
        raise AssertionError("rescore refitted a calibrator")

    monkeypatch.setattr("calbench.runner.cell._fit_fold", no_refit)
    wanted = metric_options(["confidence_ece_size15", "mce"])
    assert wanted["confidence_ece_size15"] == {
        "fn": "confidence_ece",
        "n_bins": 15,
        "binning": "equal_size",
    }
    assert rescore(tmp_path, {"conf_ece_20": {"fn": "confidence_ece", "n_bins": 20}}) == (2, [])
    assert rescore(tmp_path, wanted) == (2, [])
    after = store.read()
    # 2 cells x 5 folds x 1 new metric; the default set's mce and ECE are replaced, not doubled
    assert len(after) == len(before) + 2 * 5
    for cell in after.drop_duplicates("config_hash").itertuples():
        for fold in store.predictions(cell.config_hash, cell.predictions_sha256):
            mine = after[(after["config_hash"] == cell.config_hash) & (after["fold"] == fold.fold)]
            value = mine.set_index("metric")["value"]
            # Reference: the metric functions on the stored predictions, by hand.
            assert value["conf_ece_20"] == confidence_ece(fold.probs, fold.y, n_bins=20)
            assert value["mce"] == mce(fold.probs, fold.y, n_bins=15, binning="equal_width")
            assert mine["params"].nunique() == 1 and (mine["fit_seconds"] > 0).all()
    config_text = (tmp_path / "store" / f"{cell.config_hash}.yaml").read_text()
    assert set(load_yaml(config_text)["rescored"]) == {
        "conf_ece_20",
        "confidence_ece_size15",
        "mce",
    }
    with pytest.raises(CalbenchError, match="Unknown metric 'smece'"):
        metric_options(["smece"])


def test_large_arrays_are_stored_uncompressed_and_read_back_equal(tmp_path, monkeypatch):
    """Past `STORE_UNCOMPRESSED_BYTES` an array is stored, not deflated (float
    probabilities barely compress); the scores from the file are the stored rows'."""
    import zipfile

    from calbench.results import predictions

    monkeypatch.setattr(predictions, "STORE_UNCOMPRESSED_BYTES", 1000)
    run_job(plan(*SMALL, f"results_dir={tmp_path}"))
    store, rows, cells = _cells(tmp_path)
    cell = cells.iloc[0]
    files = list((tmp_path / "store").rglob(f"*{cell.config_hash}*.npz"))
    members = {i.filename: i.compress_type for f in files for i in zipfile.ZipFile(f).infolist()}
    big = [n for n in members if n.startswith("probs/")]
    assert big and all(members[n] == zipfile.ZIP_STORED for n in big)
    fold = store.predictions(cell.config_hash, cell.predictions_sha256)[0]
    stored = rows.set_index("metric")["value"]
    assert fold.scores({"log_loss": {}})["log_loss"] == pytest.approx(stored["log_loss"], rel=1e-12)
