"""Bad configurations get one clear error before any work (issue: no silent surprises)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.runner.cell import run_cell
from calbench.runner.checks import check_experiment_choice
from tests.runner.test_runner import plan


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["+methd=vs"], r"unknown config key methd \(did you mean 'method'\?\)"),
        (["+method.foo=1"], "unknown config key method.foo"),
        (["seed=abc"], "seed must be an integer; got seed='abc'"),
        (["seed=1.5"], "seed must be an integer"),
        (["seed=-1"], r"seed must be a non-negative integer below 2\*\*63; got seed=-1"),
        (["seed=9223372036854775808"], "non-negative integer below 2"),
        (["dataset.seed=-3"], "dataset.seed must be a non-negative integer .* got dataset.seed=-3"),
        (["method=knn_kl", "method.grid.n_neighbors=[]"], "method.grid.n_neighbors is empty"),
        (
            ["method=knn_kl", "method.grid.n_neighbors=[abc]"],
            "'n_neighbors' parameter of KNNCalibrator must be an int >= 1. Got 'abc'",
        ),
        (["method=knn_kl", "method.grid.n_neighbors=[10.7]"], "must be an int >= 1. Got 10.7"),
        (
            ["method=dir_odir", "method.grid.reg_lambda=[-1.0]"],
            'must be "auto" or a finite number >= 0',
        ),
        (["method=dir_odir", "+method.params.reg_mu=-2"], "'reg_mu' parameter"),
        (["method=ts", "+method.params.tol=nan"], r"method.params.tol=nan; a parameter is a"),
        (  # her own class, no constraint declared
            [
                "method.name=mine",
                "method.calibrator=tests.runner.test_own_outputs:Bad",
                "+method.grid.fault=[inf]",
            ],
            "method.grid.fault holds inf; a grid point is a finite number",
        ),
        (  # numbers and a typo, where the calibrator declares no constraint (her own)
            [
                "method.name=mine",
                "method.calibrator=tests.runner.test_own_outputs:Bad",
                "+method.grid.fault=[0.5,negative]",
            ],
            r"method.grid.fault=\[0.5, 'negative'\] mixes numbers and text \('negative'\)",
        ),
        (  # her class under a library method's name would be stored as that method's
            ["method.calibrator=vs"],
            r"replaces the calibrator of method 'ts' \(calibrator ts\) .* method.name=my_vs\.",
        ),
        (
            ["method=knn_kl", "+method.params.n_neighbors=64"],
            "both fixed .* and searched .*; the grid would override it",
        ),
    ],
)
def test_bad_run_configs_are_refused_with_their_fix(overrides, message):
    with pytest.raises(CalbenchError, match=message):
        plan(*overrides)


def test_a_calibrator_under_its_own_name_is_planned():
    assert plan("method.calibrator=vs", "method.name=my_vs").spec.method["name"] == "my_vs"


def test_a_preset_name_must_name_a_preset():
    with pytest.raises(CalbenchError, match=r"names no preset \(did you mean 'valk_synthetic'"):
        check_experiment_choice("valk_synthetc")
    check_experiment_choice("valk_synthetic")
    check_experiment_choice(None)  # no preset asked for


def test_a_scalar_grid_value_is_a_one_point_grid_and_clipped_k_is_stored_as_used():
    rows = run_cell(plan("method=knn_kl", "method.grid.n_neighbors=4096", "dataset.n_cal=200"))
    assert json.loads(rows["params"].iat[0]) == {"n_neighbors": 200}


def test_the_cli_refuses_a_preset_typo_instead_of_running_the_default(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "calbench.cli",
            "run",
            "experiment=valk_synthetc",
            f"results_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "did you mean 'valk_synthetic'" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "store").exists()


def test_ctrl_c_after_the_first_cell_prints_one_line_and_exits_130(tmp_path, monkeypatch, capsys):
    """In-process and deterministic: the second cell is interrupted."""
    import calbench.runner.job as job
    from calbench.cli import main

    real = job.run_job
    calls = []

    def interrupted_after_one(plan):
        calls.append(plan.method)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(plan)

    monkeypatch.setattr(job, "run_job", interrupted_after_one)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "run",
                "-m",
                "method=ts,vs,bcts",
                f"results_dir={tmp_path}",
                "hydra.sweep.dir=" + str(tmp_path / "sweep"),
                "hydra.launcher.n_jobs=1",  # in this process, where the patch is
            ]
        )
    err = capsys.readouterr().err
    assert exit_info.value.code == 130 and calls == ["ts", "vs"]
    assert "interrupted: 1 cell(s) stored in" in err and "Traceback" not in err
    assert len(list((tmp_path / "store").glob("*.csv"))) == 1


@pytest.mark.slow  # a real SIGINT to a child process: timing-dependent under load
def test_ctrl_c_in_a_sweep_prints_one_line_and_exits_130(tmp_path):
    import signal
    import time

    # 280 cells: the signal comes long before the last (with 7 cells, a starved test
    # process once saw the first file only after the whole sweep had ended).
    sweep = ["method=ts,vs,bcts,dir,dir_l2,dir_odir,ms_odir", "seed=range(0,40)"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "calbench.cli", "run", "-m", *sweep, f"results_dir={tmp_path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = tmp_path / "store"
    deadline = time.time() + 120
    while not (store.is_dir() and any(store.glob("*.csv"))) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    stored = len(list(store.glob("*.csv")))
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert f"interrupted: {stored} cell(s) stored" in err and "rerun the same command" in err


def test_unknown_figure_formats_are_refused_first(tmp_path):
    from calbench.cli.figures import main

    with pytest.raises(CalbenchError, match=r"Unknown figure format\(s\) \['foo'\]"):
        main(["--formats", "png,foo", "--results-dir", str(tmp_path)])


def test_classes_an_inner_cv_leaves_out_are_counted_and_said(tmp_path, rng, capsys):
    """Unstratified inner CV (Valk's) on a calibration set with a one-sample class: the inner
    fold that tests that sample trains without the class; the run says so and stores it."""
    from calbench.results.store import ResultStore
    from calbench.runner.job import run_job

    y_cal = np.r_[np.repeat([0, 1], 150), 2]
    y_test = rng.integers(0, 3, 300)
    z_cal, z_test = rng.normal(size=(301, 3)), rng.normal(size=(300, 3))
    z_cal[np.arange(301), y_cal] += 2
    path = tmp_path / "rare.npz"
    np.savez(path, y_cal=y_cal, y_test=y_test, logits_cal=z_cal, logits_test=z_test)
    common = ["dataset=npz", f"dataset.path={path}", f"results_dir={tmp_path}"]
    kfold = ["protocol.inner_cv=kfold", "protocol.inner_folds=5"]
    run_job(plan("method=dir_l2", "method.grid.reg_lambda=[0.01,1.0]", *kfold, *common))
    said = capsys.readouterr().out
    assert "note: in 1 fold(s) the inner CV left a class out of 1 inner training part(s)" in said
    rows = ResultStore(tmp_path).read()
    assert rows.loc[rows["metric"] == "inner_classes_missing", "value"].tolist() == [1.0]
    run_job(plan("method=ts", *kfold, *common))  # no grid, no inner CV: nothing left out
    assert "note: in" not in capsys.readouterr().out
    with pytest.raises(CalbenchError, match="class 2 has 1 sample"):  # stratified: refused
        run_job(plan("method=dir_l2", "method.grid.reg_lambda=[0.01,1.0]", *common))
