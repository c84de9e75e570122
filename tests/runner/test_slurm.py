"""A sweep through a real SLURM scheduler (``hydra.launcher.backend=slurm``): a one-node
cluster started by the test on this machine (`tests.runner.slurm_cluster`), the cells in
array tasks of two, one task killed while it runs, and the store afterwards equal to a
local run's, value for value. The plan alone (``slurm.dry_run``) needs no scheduler."""

import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

from tests.cli.test_cli import SMALL, calbench
from tests.runner.slurm_cluster import one_node_cluster, skip_reason
from tests.runner.test_parallel_sweeps import _values

METHODS = "method=ts,vs,dir_l2,dir_odir"


def test_a_dry_run_prints_the_array_jobs_and_submits_nothing(tmp_path):
    out = calbench(
        "run", "-m", METHODS, SMALL, "hydra.launcher.backend=slurm",
        "hydra.launcher.slurm.dry_run=true", "hydra.launcher.slurm.cells_per_job=3",
        "+hydra.launcher.slurm.by_method.dir_odir.mem_gb=16",
        f"results_dir={tmp_path / 'r'}",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "4 cell(s) in 2 array job(s), 3 cell(s) a task" in out.stdout
    assert "array 1: 1 task(s) | cpus_per_task=1, mem_gb=4.0" in out.stdout
    assert "methods: ts, vs, dir_l2" in out.stdout
    assert "mem_gb=16" in out.stdout and "methods: dir_odir" in out.stdout
    assert not (tmp_path / "r" / "store").exists()


def test_a_methods_resources_name_only_known_keys(tmp_path):
    out = calbench(
        "run", "-m", METHODS, SMALL, "hydra.launcher.backend=slurm",
        "hydra.launcher.slurm.dry_run=true", "+hydra.launcher.slurm.by_method.ts.memory=16",
        f"results_dir={tmp_path / 'r'}",
    )  # fmt: skip
    assert out.returncode == 2
    assert "by_method.ts sets memory; a method may set cpus_per_task, mem_gb" in out.stderr


def _kill_one_running_task(env, killed: list, stop: threading.Event) -> None:
    """SIGKILL the first array task's process seen running, as the kernel kills a task out
    of memory: no time to finish its cells or write its results."""
    while not stop.is_set() and not killed:
        out = subprocess.run(
            ["pgrep", "-f", "submitit.core._submit"], capture_output=True, text=True
        )
        pids = [int(p) for p in out.stdout.split()]
        if pids:
            time.sleep(0.5)
            try:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            except ProcessLookupError:
                continue
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
def test_a_slurm_sweep_equals_a_local_one_and_reruns_a_killed_task(tmp_path):
    local = calbench("run", "-m", METHODS, SMALL, f"results_dir={tmp_path / 'local'}")
    assert local.returncode == 0, local.stderr[-2000:]
    with one_node_cluster(tmp_path / "cluster") as env:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        killed, stop = [], threading.Event()
        killer = threading.Thread(target=_kill_one_running_task, args=(env, killed, stop))
        killer.start()
        try:
            out = calbench(
                "run", "-m", METHODS, SMALL, "hydra.launcher.backend=slurm",
                "hydra.launcher.slurm.cells_per_job=2", "hydra.launcher.slurm.mem_gb=2",
                "hydra.launcher.slurm.poll_s=0.5", f"results_dir={tmp_path / 'slurm'}",
            )  # fmt: skip
        finally:
            stop.set()
            killer.join()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    assert out.returncode == 0, out.stderr[-3000:]
    assert killed, "no task was caught running: the kill was not tested"
    assert "ended without its results; submitted again" in out.stderr
    assert "[sweep] 4/4 cells" in out.stdout and "on 2 job(s)" in out.stdout
    local_values, slurm_values = _values(tmp_path / "local"), _values(tmp_path / "slurm")
    assert local_values.index.equals(slurm_values.index) and len(local_values) > 40
    np.testing.assert_array_equal(local_values.to_numpy(), slurm_values.to_numpy())
