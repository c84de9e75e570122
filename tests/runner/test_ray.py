"""A sweep on a Ray cluster (``hydra.launcher.backend=ray``): a head and a worker node
started by the test on this machine (loopback only), a worker process killed while it runs
a cell, and the store afterwards equal to one job's, value for value."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tests.cli.test_cli import SMALL, calbench
from tests.runner.test_parallel_sweeps import _values

pytestmark = pytest.mark.slow  # a Ray cluster takes ~20 s to start

METHODS = "method=ts,vs,dir_l2,dir_odir"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(monkeypatch):
    pytest.importorskip("ray")
    # Ray 2.5x turns token authentication on for a cluster started by `ray start`; a test
    # cluster on loopback needs none (a real cluster shares its token, see the README).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray = shutil.which("ray") or os.path.join(os.path.dirname(sys.executable), "ray")
    port = _free_port()
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    subprocess.run(
        [ray, "start", "--head", f"--port={port}", "--include-dashboard=false", *common],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [ray, "start", f"--address=127.0.0.1:{port}", *common], check=True, capture_output=True
        )
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True)


def _kill_one_running_cell(killed: list, stop: threading.Event) -> None:
    """SIGKILL the first Ray worker seen running a cell (its title is ray::_run_cell)."""
    while not stop.is_set() and not killed:
        out = subprocess.run(["pgrep", "-f", "ray::_run_cell"], capture_output=True, text=True)
        pids = [int(p) for p in out.stdout.split()]
        if pids:
            time.sleep(0.5)  # into the fit, not its start
            try:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            except ProcessLookupError:
                continue
        time.sleep(0.1)


def test_a_ray_sweep_equals_one_job_and_reruns_a_killed_workers_cell(cluster, tmp_path):
    one = calbench(
        "run", "-m", METHODS, SMALL, "hydra.launcher.n_jobs=1", f"results_dir={tmp_path / 'one'}"
    )
    assert one.returncode == 0, one.stderr
    killed, stop = [], threading.Event()
    killer = threading.Thread(target=_kill_one_running_cell, args=(killed, stop))
    killer.start()
    try:
        out = calbench(
            "run",
            "-m",
            METHODS,
            SMALL,
            "hydra.launcher.backend=ray",
            f"hydra.launcher.ray_address={cluster}",
            f"results_dir={tmp_path / 'ray'}",
        )
    finally:
        stop.set()
        killer.join()
    assert out.returncode == 0, out.stderr[-3000:]
    assert killed, "no worker was caught running a cell: the kill was not tested"
    assert "[sweep] 4/4 cells (0 found stored) | " in out.stdout
    assert "on 2 job(s)" in out.stdout  # the head's CPU and the worker node's
    one_values, ray_values = _values(tmp_path / "one"), _values(tmp_path / "ray")
    assert one_values.index.equals(ray_values.index) and len(one_values) > 40
    np.testing.assert_array_equal(one_values.to_numpy(), ray_values.to_numpy())
