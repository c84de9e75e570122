"""Faults and bad input: nothing lost, the same numbers as a clean run, one clear message.

Damaged rows, predictions and shared arrays; two writers of one cell and two rescores at
once; a store that cannot be written; sweeps whose cells fail or whose workers die; the
user's files re-exported or sharing a name. The kills of whole runs at random points are
in the slow suite (`test_a_run_killed_at_random_points_loses_nothing`).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calbench.errors import CalbenchError
from calbench.results.store import DamagedCells, ResultStore
from calbench.results.verify import repair, verify
from calbench.runner.job import run_job
from tests.cli.test_cli import calbench
from tests.runner.test_runner import plan

SMALL = ["dataset.n_cal=600", "dataset.n_test=900"]


def _values(results_dir) -> pd.Series:
    rows = ResultStore(results_dir).read()
    return rows.set_index(["method", "fold", "metric"])["value"].sort_index()


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """Two cells run once, untouched: the numbers every repaired store must give again."""
    results = tmp_path_factory.mktemp("clean")
    for method in ("ts", "vs"):
        run_job(plan(*SMALL, f"method={method}", f"results_dir={results}"))
    return results


@pytest.fixture
def store_copy(clean, tmp_path):
    shutil.copytree(clean / "store", tmp_path / "store")
    return tmp_path


def _rows_file(results, method="ts") -> Path:
    rows = ResultStore(results).read()
    cell = rows.loc[rows["method"] == method, "config_hash"].iat[0]
    return results / "store" / f"{cell}.csv"


def _cut_inside_a_value(data):
    return data[: data.rindex(b",log_loss,") + len(b",log_loss,0.6")]


DAMAGE = {
    "cut inside a value": _cut_inside_a_value,
    "cut at a line end": lambda d: d[: d.rindex(b"\n", 0, len(d) - 1) + 1],
    "header only": lambda d: d.partition(b"\n")[0] + b"\n",
    "empty": lambda d: b"",
    "random bytes": lambda d: np.random.default_rng(0).bytes(len(d)),
    "an extra field": lambda d: d.replace(b"\n", b",extra\n", 2),
    "an edited value": lambda d: d.replace(b",accuracy,0.", b",accuracy,1.", 1),
    "rows appended twice": lambda d: d + d.partition(b"\n")[2],
    "a row missing": lambda d: b"\n".join(d.split(b"\n")[:2] + d.split(b"\n")[3:]),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_rows_are_named_never_read_and_recomputed_to_the_same_numbers(
    clean, store_copy, kind
):
    path = _rows_file(store_copy)
    path.write_bytes(DAMAGE[kind](path.read_bytes()))
    with pytest.raises(DamagedCells, match=f"{path.name}: .*\n.*store verify --repair") as err:
        ResultStore(store_copy).read()
    assert list(err.value.problems) == [path]
    problems, _ = verify(store_copy)
    assert [p.path for p in problems] == [path]
    # The next run of the cell moves it aside and computes it again.
    run_job(plan(*SMALL, "method=ts", f"results_dir={store_copy}"))
    pd.testing.assert_series_equal(_values(store_copy), _values(clean), check_exact=True)
    assert list((store_copy / "store" / "damaged").glob(f"{path.stem}.*.csv"))


def test_a_cell_copied_under_another_name_is_refused(store_copy):
    path = _rows_file(store_copy)
    shutil.copy(path, path.with_name("0123456789abcdef.csv"))
    with pytest.raises(DamagedCells, match="0123456789abcdef.csv: its rows name another cell"):
        ResultStore(store_copy).read()


def test_rows_stored_before_the_checksum_are_read_and_checked_for_shape(clean, store_copy):
    """Cells of an earlier calbench carry no checksum: read as before, but a value that is
    not a number or a line with a field too many is damage, not a blank table cell."""
    path = _rows_file(store_copy)
    old = pd.read_csv(path, dtype=str, keep_default_na=False).drop(
        columns=["stored_at", "cell_sha256"]
    )
    path.write_text(old.to_csv(index=False))
    pd.testing.assert_series_equal(_values(store_copy), _values(clean), check_exact=True)
    path.write_text(old.to_csv(index=False).replace(",accuracy,0.", ",accuracy,x0.", 1))
    with pytest.raises(DamagedCells, match="value 'x0.* is not a number"):
        ResultStore(store_copy).read()


def test_touching_or_copying_files_does_not_change_which_cell_tables_show(tmp_path):
    """Two settings of one method (a grid edited between runs): the later run is shown,
    by the time in its rows, whatever the files' times say."""
    for tol in ("1e-6", "1e-8"):
        run_job(plan(*SMALL, "method=ts", f"+method.params.tol={tol}", f"results_dir={tmp_path}"))
    store = ResultStore(tmp_path)
    shown = store.read()["config_hash"].unique().tolist()
    for path in (tmp_path / "store").glob("*.csv"):
        os.utime(path, (time.time() + 3600,) * 2 if path.stem not in shown else (0, 0))
    assert store.read()["config_hash"].unique().tolist() == shown


def test_damaged_predictions_and_shared_arrays_are_found_and_repaired(clean, store_copy):
    shared = next((store_copy / "store" / "arrays").glob("*.npz"))
    shared.write_bytes(b"PK\x03\x04 not really a zip")
    cell = _rows_file(store_copy, "vs").with_suffix(".npz")
    cell.write_bytes(cell.read_bytes()[:100])
    problems, counts = verify(store_copy)
    assert counts["cells"] == 2
    assert {p.path for p in problems} >= {shared, cell}
    assert all("damaged npz" in p.reason or "checksum" in p.reason for p in problems)
    repair(store_copy, problems)
    assert verify(store_copy)[0] == []
    for method in ("ts", "vs"):  # both cells named the damaged shared file: both recomputed
        run_job(plan(*SMALL, f"method={method}", f"results_dir={store_copy}"))
    pd.testing.assert_series_equal(_values(store_copy), _values(clean), check_exact=True)
    assert verify(store_copy)[0] == []


def test_a_new_cell_rewrites_a_damaged_shared_arrays_file(clean, store_copy):
    shared = next((store_copy / "store" / "arrays").glob("*.npz"))
    shared.write_bytes(b"garbage")
    run_job(plan(*SMALL, "method=bcts", f"results_dir={store_copy}"))
    assert [p for p in verify(store_copy)[0] if p.cell is None] == []


def test_two_writers_of_one_cell_compute_it_once(tmp_path):
    args = ("run", *SMALL, "method=dir_l2", f"results_dir={tmp_path}")
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "calbench.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    stdout = "".join(out for out, _ in outs)
    assert stdout.count("[stored] ") == 1  # one computed, the other found it stored
    assert "already in the store" in stdout or "stored meanwhile" in stdout
    assert verify(tmp_path)[0] == []
    assert len(list((tmp_path / "store").glob("*.csv"))) == 1


def test_two_rescores_at_once_keep_both_metrics(clean, store_copy):
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "calbench.cli", "rescore", "--metrics", metric]
            + ["--results-dir", str(store_copy)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for metric in ("mce", "confidence_ece_size15")
    ]
    assert [r.wait(timeout=300) for r in runs] == [0, 0]
    rows = ResultStore(store_copy).read()
    metrics = rows.groupby("config_hash")["metric"].agg(set)
    assert all({"mce", "confidence_ece_size15"} <= m for m in metrics)
    assert verify(store_copy)[0] == []


def test_a_store_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    out = calbench("run", *SMALL, f"results_dir={blocker}")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "a_file is a file, not a folder; choose another folder" in out.stderr
    empty = calbench("run", *SMALL, "results_dir=")
    assert empty.returncode == 2 and "results_dir is empty: Hydra would write" in empty.stderr


def test_a_full_disk_is_one_error_and_leaves_no_cell(tmp_path, monkeypatch):
    import errno

    import calbench.atomic

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device", str(args[-1]))

    monkeypatch.setattr(calbench.atomic.os, "replace", full)
    with pytest.raises(CalbenchError, match=r"Cannot write to .*: the disk is full"):
        run_job(plan(*SMALL, f"results_dir={tmp_path}"))
    monkeypatch.undo()
    assert not list((tmp_path / "store").glob("*.csv"))
    assert not list((tmp_path / "store").rglob("*.tmp"))


def _npz(path, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    z, y = rng.normal(size=(600, 3)) * scale, rng.integers(0, 3, 600)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, logits_cal=z[:300], y_cal=y[:300], logits_test=z[300:], y_test=y[300:])
    return path


def test_scores_written_again_to_the_same_path_are_computed_again(tmp_path):
    path = _npz(tmp_path / "scores.npz", seed=0)
    args = ("dataset=npz", f"dataset.path={path}", f"results_dir={tmp_path}")
    run_job(plan(*args))
    first = _values(tmp_path)
    _npz(path, seed=1, scale=3.0)  # the next model's scores, same file
    found = plan(*args)
    assert not ResultStore(tmp_path).has(found.hash)
    run_job(found)
    rows = ResultStore(tmp_path).read()
    assert len(rows["config_hash"].unique()) == 1  # the old model's cell is not shown
    assert not np.allclose(_values(tmp_path).to_numpy(), first.to_numpy())


def test_two_files_that_would_share_a_data_set_name_are_refused(tmp_path):
    a, b = _npz(tmp_path / "a" / "scores.npz", 0), _npz(tmp_path / "b" / "scores.npz", 1, 2.0)
    run_job(plan("dataset=npz", f"dataset.path={a}", f"results_dir={tmp_path}"))
    with pytest.raises(CalbenchError, match=r"'scores' .* already names .*a/scores.npz.*name="):
        run_job(plan("dataset=npz", f"dataset.path={b}", f"results_dir={tmp_path}"))
    run_job(plan("dataset=npz", f"dataset.path={b}", "dataset.name=b", f"results_dir={tmp_path}"))
    assert sorted(ResultStore(tmp_path).read()["dataset"].unique()) == ["b", "scores"]


def test_a_moved_file_keeps_its_cells(tmp_path):
    path = _npz(tmp_path / "a" / "scores.npz", 0)
    first = plan("dataset=npz", f"dataset.path={path}", f"results_dir={tmp_path}")
    moved = tmp_path / "b" / "scores.npz"
    moved.parent.mkdir()
    shutil.move(path, moved)
    assert plan("dataset=npz", f"dataset.path={moved}", f"results_dir={tmp_path}").hash == (
        first.hash
    )


CALIBRATORS = """
import os, signal
import numpy as np
from calbench.calibrators.scaling.temperature import TemperatureScaling


class Raises(TemperatureScaling):
    # ``fail=False`` fits as temperature scaling: a sweep over it mixes cells that fail with
    # cells that do not, under one method name and one calibrator.
    def __init__(self, criterion="nll", max_iter=1000, tol=1e-6, warm_start=False,
                 device="cpu", fail=True):
        super().__init__(criterion, max_iter, tol, warm_start, device)
        self.fail = fail

    def _fit(self, logits, y):
        if self.fail:
            raise ZeroDivisionError("my calibrator divided by zero")
        super()._fit(logits, y)


class Dies(Raises):
    def _fit(self, logits, y):
        if self.fail:
            os.kill(os.getpid(), signal.SIGKILL)
        super()._fit(logits, y)
"""


@pytest.fixture
def own_calibrators(tmp_path, monkeypatch):
    (tmp_path / "own_calibrators.py").write_text(CALIBRATORS)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return tmp_path


def _sweep(results, *overrides):
    return calbench("run", "-m", *SMALL, *overrides, f"results_dir={results}")


# Two jobs in the slow suite (10 s): the quick one keeps the parallel launcher's failure
# path through test_a_killed_worker_costs_its_cell_only.
@pytest.mark.parametrize("jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_sweep_runs_every_cell_it_can_and_reports_the_failures(own_calibrators, jobs):
    results = own_calibrators / "results"
    out = _sweep(
        results,
        "dataset.seed=0,1",
        "method.name=own",
        "method.calibrator=own_calibrators:Raises",
        "+method.params.fail=false,true",
        f"hydra.launcher.n_jobs={jobs}",
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "[sweep] 2 of 4 cells failed" in out.stderr
    assert out.stderr.count("ZeroDivisionError: my calibrator divided by zero") == 2
    assert len(list((results / "store").glob("*.csv"))) == 2
    assert (results / "failures.log").read_text().count("divided by zero") == 2
    again = _sweep(
        results,
        "dataset.seed=0,1",
        "method.name=own",
        "method.calibrator=own_calibrators:Raises",
        "+method.params.fail=false,true",
        f"hydra.launcher.n_jobs={jobs}",
    )
    assert "(2 found stored)" in again.stdout and again.returncode == 1


def test_fail_fast_stops_at_the_first_failure(own_calibrators):
    results = own_calibrators / "results"
    out = _sweep(
        results,
        "dataset.seed=0,1,2",
        "method.name=own",
        "method.calibrator=own_calibrators:Raises",
        "hydra.launcher.n_jobs=1",
        "hydra.launcher.fail_fast=true",
    )
    assert out.returncode == 1 and "1 of 3 cells failed, 2 not run (fail_fast)" in out.stderr


@pytest.mark.slow  # 11 s: in make test-slow beside the kills at random moments
def test_a_killed_worker_costs_its_cell_only(own_calibrators):
    results = own_calibrators / "results"
    out = _sweep(
        results,
        "dataset.seed=0,1,2",
        "method.name=own",
        "method.calibrator=own_calibrators:Dies",
        "+method.params.fail=false,true",
        "hydra.launcher.n_jobs=2",
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "3 of 6 cells failed" in out.stderr
    assert "its worker process died" in out.stderr
    assert len(list((results / "store").glob("*.csv"))) == 3
    assert verify(results)[0] == []


def test_a_calibrators_exception_in_a_single_run_is_one_line(own_calibrators):
    out = calbench(
        "run",
        *SMALL,
        "method.name=own",
        "method.calibrator=own_calibrators:Raises",
        f"results_dir={own_calibrators}/results",
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("calbench: error: ZeroDivisionError: my calibrator divided")
    assert len(out.stderr.strip().splitlines()) == 2


@pytest.mark.slow
def test_a_run_killed_at_random_points_loses_nothing(tmp_path):
    """kill -9 of a sweep at three random moments; each time the store holds only whole
    cells, and the rerun ends with the clean run's numbers."""
    args = ["run", "-m", *SMALL, "method=ts,vs,bcts,dir_l2", "hydra.launcher.n_jobs=2"]
    clean = tmp_path / "clean"
    assert calbench(*args, f"results_dir={clean}").returncode == 0
    killed = tmp_path / "killed"
    rng = np.random.default_rng(0)
    for delay in rng.uniform(2.0, 8.0, size=3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "calbench.cli", *args, f"results_dir={killed}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if (killed / "store").is_dir():
            ResultStore(killed).read()  # whole cells only: no DamagedCells
    assert calbench(*args, f"results_dir={killed}").returncode == 0
    pd.testing.assert_series_equal(_values(killed), _values(clean), check_exact=True)
    leftovers = [p for p in verify(killed)[0] if not p.path.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["method=ms_odr"], "method=ms_odr names no method (did you mean 'ms_odir'?); `calbench"),
        (["-m", "method=ts,vss"], "method=vss names no method (did you mean 'vs'?)"),
        (["loss=zero_on"], "loss=zero_on names no loss (did you mean 'zero_one'?); they are:"),
        (["dataset.path=s.npz"], "dataset.path is set but no data set that reads a file is"),
        (["dataset.name=../up"], "dataset.name='../up' cannot name files, tables and page anchors"),
        (["method=dir_odir", "method.grid.reg_lambda=[inf]"], "or a finite number >= 0. Got inf"),
        (
            ["method=uncal", "method.params.weight=0.5"],
            "method 'uncal' sets no method.params.weight: to add it, write +method.params.",
        ),
        (
            ["method=knn_kl", "method.grid.n_neighbor=[5]"],
            "sets no method.grid.n_neighbor (did you mean 'method.grid.n_neighbors'?)",
        ),
    ],
    ids=[
        "method",
        "swept_method",
        "loss",
        "path_without_loader",
        "name",
        "inf_in_grid",
        "no_plus",
        "no_plus_typo",
    ],
)
def test_config_mistakes_are_one_line_with_their_fix(tmp_path, args, message):
    out = calbench("run", *args, f"results_dir={tmp_path}")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_damaged_config_is_named_and_store_verify_says_so(store_copy):
    config = _rows_file(store_copy).with_suffix(".yaml")
    config.write_text("method: [unclosed\n")
    with pytest.raises(DamagedCells, match=f"{config.name}: its config is not the one its rows"):
        ResultStore(store_copy).read()
    out = calbench("store", "verify", "--results-dir", str(store_copy))
    assert out.returncode == 1 and f"{config}: its config is not the one" in out.stdout
    fixed = calbench("store", "verify", "--repair", "--results-dir", str(store_copy))
    assert fixed.returncode == 0 and "moved cell" in fixed.stdout
    assert calbench("store", "verify", "--results-dir", str(store_copy)).returncode == 0
    assert len(ResultStore(store_copy).read()["config_hash"].unique()) == 1
