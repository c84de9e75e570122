"""Sweeps run in parallel by default (hydra_plugins/calbench_launcher): the same numbers
whatever the number of jobs, a progress line per cell, BLAS threads shared out."""

import os

import numpy as np
import pytest

from tests.cli.test_cli import SMALL, calbench, stored

METHODS = "method=ts,vs,dir_l2,knn_kl"


def _values(results):
    rows = stored(results)
    rows = rows[rows["metric"] != "fit_seconds"]
    return rows.set_index(["method", "metric", "fold"])["value"].sort_index()


@pytest.mark.slow  # 23 s; test_sweep_composer and the stored cell hashes keep the composer quick
def test_a_sweep_stores_the_same_numbers_on_one_job_or_two(tmp_path):
    """kull_uci's and valk_real's cells are fitted in worker processes with one BLAS thread
    each where one job had both cores: the stored numbers must not move. The one-job run
    composes and runs its jobs Hydra's way (``compose=hydra``), the two-job run from the
    launcher's cached parts: the same cells (hashes) with the same numbers."""
    runs, hashes = {}, {}
    for jobs, compose in ((1, "hydra"), (2, "cached")):
        out = calbench(
            "run",
            "-m",
            METHODS,
            SMALL,
            f"hydra.launcher.n_jobs={jobs}",
            f"hydra.launcher.compose={compose}",
            f"results_dir={tmp_path / str(jobs)}",
        )
        assert out.returncode == 0, out.stderr
        assert "[sweep] 4/4 cells (0 found stored) | " in out.stdout
        assert f"on {jobs} job(s)" in out.stdout
        runs[jobs] = _values(tmp_path / str(jobs))
        hashes[jobs] = sorted(p.stem for p in (tmp_path / str(jobs) / "store").glob("*.csv"))
    assert hashes[1] == hashes[2] and len(hashes[1]) == 4
    assert runs[1].index.equals(runs[2].index) and len(runs[1]) > 40
    np.testing.assert_array_equal(runs[1].to_numpy(), runs[2].to_numpy())


@pytest.mark.slow  # 16 s; test_multirun_sweep_and_resume keeps resumption quick
def test_the_default_uses_every_core_and_says_what_it_found_stored(tmp_path):
    from joblib import cpu_count

    args = ("run", "-m", "method=ts,vs,bcts", SMALL, f"results_dir={tmp_path}")
    first = calbench(*args)
    assert first.returncode == 0, first.stderr
    assert f"on {min(cpu_count(), 3)} job(s)" in first.stdout
    again = calbench(*args)
    assert "[sweep] 3/3 cells (3 found stored)" in again.stdout
    assert "to go" not in again.stdout.splitlines()[-1]


def test_a_bad_n_jobs_is_one_line(tmp_path):
    out = calbench(
        "run", "-m", "method=ts,vs", "hydra.launcher.n_jobs=0", f"results_dir={tmp_path}"
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "hydra.launcher.n_jobs must be -1 (every core) or >= 1; got 0" in out.stderr


def test_workers_are_the_cores_but_never_more_than_the_cells():
    from joblib import cpu_count

    from hydra_plugins.calbench_launcher.calbench_launcher import workers

    assert workers(-1, 1000) == cpu_count() and workers(-1, 1) == 1
    assert workers(3, 2) == 2
    with pytest.raises(ValueError, match="n_jobs must be -1"):
        workers(0, 5)


def _blas_threads():
    from threadpoolctl import threadpool_info

    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: nothing to share out")
def test_each_worker_gets_its_share_of_the_blas_threads():
    """Loky (the launcher's backend) limits each worker's BLAS to cores // jobs, so two
    jobs of matrix products do not fight over the same cores."""
    from joblib import Parallel, cpu_count, delayed

    threads = Parallel(n_jobs=2, backend="loky")(delayed(_blas_threads)() for _ in range(2))
    assert threads == [max(cpu_count() // 2, 1)] * 2
