"""The pinned float32 arithmetic of CalArena's MS and SMS replicas: the child runs torch's
AVX2 kernels on one thread, and a fit gives the same bits whatever the caller's threads."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.papers.calarena2026.pinned_arithmetic import arithmetic, can_pin, pinned

pytestmark = pytest.mark.skipif(not can_pin(), reason="this CPU has no AVX2 kernels to pin")


def test_the_child_runs_avx2_kernels_on_one_thread():
    assert pinned(arithmetic) == ("AVX2", 1)


def test_a_float32_fit_does_not_depend_on_the_callers_threads():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchmin")
    from calbench.papers.calarena2026.replicas import fit_float32_matrix_scaling

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(600, 4)) * 3
    y = rng.integers(0, 4, size=600)
    before = torch.get_num_threads()
    try:
        fits = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            fits.append(pinned(fit_float32_matrix_scaling, logits, y))
    finally:
        torch.set_num_threads(before)
    (m1, b1, ok1), (m2, b2, ok2) = fits
    assert ok1 and ok2
    assert np.array_equal(m1, m2) and np.array_equal(b1, b2)
    assert not np.allclose(m1, np.eye(4))  # a fit, not the identity it starts from


def test_a_failing_fit_names_itself_and_its_reason():
    with pytest.raises(CalbenchError, match=r"int: .*ValueError: invalid literal"):
        pinned(int, "not a number")
    assert pinned(int, "7") == 7  # the child serves on after a failed request


@pytest.mark.slow
def test_thirty_child_processes_give_one_fit():
    """On two threads about one child in 30 gave another fit (a parallel reduction's order);
    the pinned arithmetic's one thread gives the same bits in every child."""
    pytest.importorskip("torchmin")
    from calbench.data import load_dataset
    from calbench.papers.calarena2026.pinned_arithmetic import _Worker
    from calbench.papers.calarena2026.replicas import fit_float32_matrix_scaling

    data = load_dataset("synthetic_dirichlet", seed=0, n_cal=1500, n_test=10)
    fits = set()
    for _ in range(30):  # a new child each time: the heap and timing differ between them
        worker = _Worker()
        fits.add(
            worker.call(fit_float32_matrix_scaling, (data.logits_cal, data.y_cal))[0].tobytes()
        )
        worker.close()
    assert len(fits) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_with_its_parent(tmp_path):
    """A parent killed in the middle of a fit takes its pinned child with it."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, time\n"
        "from calbench.papers.calarena2026.pinned_arithmetic import _WORKER, pinned\n"
        "pinned(os.getpid)\n"
        "print(_WORKER.process.pid, flush=True)\n"
        "pinned(time.sleep, 60)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(50):
        if not os.path.exists(f"/proc/{child}") or "Z" in _state(child):
            return
        time.sleep(0.1)
    pytest.fail(f"the pinned child {child} outlived its parent")


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[1].split()[0]
    except OSError:
        return "Z"
