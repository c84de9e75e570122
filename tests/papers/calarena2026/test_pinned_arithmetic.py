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


@pytest.mark.slow  # 5 s, a parent killed and waited for: the quick suite stays under 7 minutes
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


def test_each_named_arithmetic_sets_its_kernels_threads_and_mkl_mode(monkeypatch):
    """A child's environment is its arithmetic's alone: variables the caller set for another
    (here MKL's reproducible mode and 8 threads) do not leak into it."""
    from calbench.papers.calarena2026.pinned_arithmetic import (
        _ARITHMETIC_VARIABLES,
        ARITHMETICS,
        PINNED_ENVIRONMENT,
        _Worker,
        in_arithmetic,
    )

    monkeypatch.setenv("MKL_CBWR", "AVX512")
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    assert len(ARITHMETICS) == 8 and ARITHMETICS["avx2_cnr_1t"] == PINNED_ENVIRONMENT
    expected = {
        "avx2_free_2t": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_NUM_THREADS": "2"},
        "native_cnr_1t": {"MKL_CBWR": "AVX2", "MKL_NUM_THREADS": "1"},
        "native_free_2t": {"MKL_NUM_THREADS": "2"},
    }
    for name, variables in expected.items():
        env = _Worker(ARITHMETICS[name])._child_environment()
        set_here = {k: env[k] for k in _ARITHMETIC_VARIABLES if k in env}
        assert set_here == {**variables, "OMP_NUM_THREADS": variables["MKL_NUM_THREADS"]}
    with pytest.raises(CalbenchError, match="unknown float32 arithmetic 'avx3_cnr_1t'"):
        in_arithmetic("avx3_cnr_1t", arithmetic)


@pytest.mark.slow
def test_a_named_arithmetics_child_runs_its_kernels_and_threads():
    from calbench.papers.calarena2026.pinned_arithmetic import in_arithmetic

    assert in_arithmetic("avx2_free_2t", arithmetic) == ("AVX2", 2)
    assert in_arithmetic("avx2_free_2t", os.getenv, "MKL_CBWR") is None
    assert in_arithmetic("native_cnr_1t", os.getenv, "MKL_CBWR") == "AVX2"


@pytest.mark.slow
def test_sms_in_mkls_own_dispatch_gives_calarenas_printed_log_loss(published_logits):
    """CalArena's printed SMS log-loss on DenseNet-40 CIFAR-10 (its results CSV) lies in the
    spread of the float32 fit over the arithmetics (measured here, an AMD EPYC: MKL's
    reproducible mode 0.2205988, its own dispatch 0.2206202)."""
    pytest.importorskip("torchmin")
    from calbench.papers.calarena2026.replicas import Float32StructuredMatrixScaling
    from calbench.papers.calarena2026.stored_inputs import float32_probabilities
    from calbench.reproduce.published import published
    from tests.conftest import load_network

    table = published("calarena_cv")
    printed = table[
        (table.dataset == "c10_densenet40")
        & (table.method == "sms_calarena")
        & (table.metric == "log_loss_float32")
    ]["value"]
    printed = float(printed.item())
    data = float32_probabilities(load_network("c10_densenet40", published_logits))
    losses = []
    for name in ("avx2_cnr_1t", "avx2_free_1t", "native_free_2t"):
        fit = Float32StructuredMatrixScaling(name).fit(data.logits_cal, data.y_cal)
        p = fit.predict_proba(data.logits_test)[np.arange(len(data.y_test)), data.y_test]
        losses.append(-np.mean(np.log(np.maximum(p, np.finfo(np.float32).tiny))))
    assert min(losses) - 5e-6 <= printed <= max(losses) + 5e-6
