"""device=cpu|cuda|auto: torch fits move, numbers do not; no GPU means the CPU and a warning."""

import warnings

import numpy as np
import pytest
import torch

from calbench.device import _fallback_warning, resolve_device
from calbench.errors import CalbenchError
from calbench.runner.cell import run_cell
from calbench.runner.plan import plan_cell
from tests.runner.test_runner import config

GPU = torch.cuda.is_available()


@pytest.mark.skipif(GPU, reason="checks the fallback where no GPU is present")
def test_cuda_without_a_gpu_falls_back_to_the_cpu_with_one_warning():
    _fallback_warning.cache_clear()
    with pytest.warns(RuntimeWarning, match="no CUDA GPU"):
        assert resolve_device("cuda") == torch.device("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per process and name, not per fit
        assert resolve_device("cuda") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(CalbenchError, match="Unknown device 'tpu'"):
        resolve_device("tpu")


@pytest.mark.parametrize(
    "overrides",
    [
        ["method=ts", "criterion=direct", "loss=zero_one_reject"],  # a torch criterion
        pytest.param(  # 5 s; the torch criterion and IOP stay quick
            ["method=dec", "+method.params.n_steps=20", "method.params.n_iterations=2"],
            marks=pytest.mark.slow,
        ),
        pytest.param(  # a smaller fit: the same check
            ["method=iop_diag", "dataset.n_cal=1500"],
            marks=pytest.mark.xfail(
                GPU,
                reason="IOP is a non-convex network fitted by L-BFGS: on an H100 its "
                "rounding led to another stopping point (log-loss 0.729010 against the "
                "CPU's 0.729005, a binned ECE 0.0395 against 0.0411; 2026-11-28)",
                strict=False,
            ),
        ),
    ],
)
def test_a_cell_gives_the_same_numbers_and_hash_on_every_device(overrides):
    base = ["dataset.n_test=500", "protocol.inner_folds=2", *overrides]
    cpu = config(*base)
    other = config(*base, "device=cuda" if GPU else "device=auto")
    cpu, other = plan_cell(cpu), plan_cell(other)
    assert cpu.hash == other.hash
    a = run_cell(cpu).set_index("metric")["value"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        b = run_cell(other).set_index("metric")["value"]
    np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ts", {}),
        ("bcts", {}),
        ("vs", {"tol": 1e-10}),  # numpy fits VS by Newton: L-BFGS must converge as far
        ("ms_odir", {"solver": "lbfgs", "reg_lambda": 1.0, "reg_mu": 0.1}),
        ("dir_odir", {"solver": "lbfgs"}),
        ("dir_l2", {"solver": "lbfgs", "reg_lambda": 1e-3}),
    ],
)
def test_scaling_maps_fitted_by_torch_on_a_device_equal_the_numpy_fit(name, params, monkeypatch):
    """The GPU path of the scaling maps (torch log-loss and autograd, L-BFGS on the CPU),
    run here on the CPU device, reaches the closed-form numpy path's map."""
    from calbench.calibrators import make_calibrator, parametric

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(800, 5)) * 3
    y = rng.integers(0, 5, 800)
    logits[np.arange(800), y] += 2
    numpy_fit = make_calibrator(name, **params).fit(logits, y)
    monkeypatch.setattr(parametric, "accelerator", lambda name: torch.device("cpu"))
    torch_fit = make_calibrator(name, device="cuda", **params).fit(logits, y)
    np.testing.assert_allclose(
        torch_fit.predict_proba(logits), numpy_fit.predict_proba(logits), atol=1e-6
    )
    assert torch_fit.loss_ == pytest.approx(numpy_fit.loss_, rel=1e-9)
