"""ODIR matrix scaling on a GPU at ImageNet shape: a default fit and the papers' 36-point
grid over 5 inner folds through ``calbench run ... device=cuda``, checked against the CPU.

    python benchmarks/bench_gpu.py [--device cuda] [--scale imagenet] [--out results/bench]

On the seeded over-confident logits of the other benches (25,000 calibration and 25,000
test rows of 1,000 classes at ``--scale imagenet``), the ``--stages`` in this order:

- ``product``: one 20,000 x 1,001 x 1,000 product in float64 and float32 (the bulk of an
  evaluation);
- ``default``: one default ``ms_odir`` fit on the device, twice (the first pays for CUDA's
  kernels and handles), with seconds, L-BFGS steps, largest gradient entry, test log-loss;
  ``profile`` adds a profile of a third; ``cpudefault`` the same fit on the CPU;
  ``stepprofile`` torch's profiler over a fit at (1000, 1000): kernel time against wall;
- ``search``: the inner-CV search in this process (36 points x 5 folds, strongest penalty
  first, each fit starting from the last): its seconds, its fits' steps and gradients;
  ``torchsearch`` the same with ``torch.optim.LBFGS`` in place of calbench's device
  L-BFGS, the reference for its speed (the stage runs last); ``searchprofile`` profiles
  ``search``;
- ``run``: ``calbench run dataset=npz ... method=ms_odir protocol.inner_folds=5
  device=DEVICE`` in a child process: its wall and fit time, the chosen point, the
  cell's test log-loss; ``refit``: the chosen point fitted on the CPU, and the difference;
- ``point``: (1000, 1000) fitted as the run fits it and to a tol = 1e-9 reference.

The default stages took about 4 minutes on one H100 with 16 cores; ``refit`` adds 2.6.
Writes <out>/gpu.csv and .md (one row per measurement) and prints each as it lands, so
that a run cut short still says what it measured. ``--scale cifar100`` runs it all in a
minute on a laptop's CPU (``--device cpu``) to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._data import overconfident_logits, write_results  # noqa: E402
from calbench.calibrators import make_calibrator  # noqa: E402
from calbench.metrics import log_loss  # noqa: E402

GRID = {
    "reg_lambda": [1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0],
    "reg_mu": [1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0],
}
RECORDS: list[dict] = []


def record(**row) -> None:
    RECORDS.append(row)
    print(json.dumps(row), flush=True)


def timed_fit(device, x, y, **params):
    return timed_fit_model(make_calibrator("ms_odir", device=device, **params), x, y, device)


def gemm_seconds(device, rows, k) -> None:
    """One (rows x k+1) by (k+1 x k) product, the bulk of an evaluation, in each precision."""
    import torch

    for dtype in (torch.float64, torch.float32):
        a = torch.randn(rows, k + 1, device=device, dtype=dtype)
        b = torch.randn(k + 1, k, device=device, dtype=dtype)
        torch.mm(a, b)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(10):
            torch.mm(a, b)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / 10
        record(
            stage="product",
            device=device,
            dtype=str(dtype),
            seconds=seconds,
            tflops=2 * rows * (k + 1) * k / seconds / 1e12,
        )


def default_fits(devices, zc, yc, zt, yt, *, profile=False) -> None:
    fitted = {}
    for where in devices:
        model, seconds = timed_fit(where, zc, yc)
        fitted[where] = log_loss(model.predict_proba(zt), yt)
        record(
            stage="default fit",
            device=where,
            seconds=seconds,
            steps=model.n_iter_,
            gradient_max=getattr(model, "gradient_max_", None),
            objective=model.loss_,
            test_log_loss=fitted[where],
            reg_lambda=model.reg_lambda_,
            reg_mu=model.reg_mu_,
            reg_diagonal=model.reg_diagonal_,
        )
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        timed_fit(devices[-1], zc, yc)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


def step_profile(device, zc, yc, point) -> None:
    """torch's profiler over one fit of ``point``: the device's kernels against the host's
    wall time, and the kernels and host calls that cost most (printed)."""
    from torch.profiler import ProfilerActivity, profile

    timed_fit(device, zc, yc, **point)  # the temperature and kernels warm
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        model, seconds = timed_fit(device, zc, yc, **point)
    events = profiler.key_averages()
    device_us = sum(e.self_device_time_total for e in events)
    record(
        stage="step profile",
        device=device,
        **point,
        seconds=seconds,
        steps=model.n_iter_,
        kernel_seconds=device_us / 1e6,
        step_ms=1000 * seconds / max(model.n_iter_, 1),
    )
    print(events.table(sort_by="self_device_time_total", row_limit=15), flush=True)
    print(events.table(sort_by="self_cpu_time_total", row_limit=15), flush=True)


def one_point(device, zc, yc, zt, yt, point) -> None:
    """One grid point fitted as ``calbench run`` fits it and to a 1e-9 reference: how far
    the default tolerance leaves the test log-loss from the minimiser's."""
    scores = {}
    for name, options in {"fit": {}, "reference": {"tol": 1e-9, "max_iter": 20000}}.items():
        model, seconds = timed_fit(device, zc, yc, **point, **options)
        scores[name] = log_loss(model.predict_proba(zt), yt)
        record(
            stage=f"point {name}",
            device=device,
            **point,
            seconds=seconds,
            steps=model.n_iter_,
            gradient_max=model.gradient_max_,
            test_log_loss=scores[name],
        )
    record(
        stage="point fit - reference", device=device, difference=scores["fit"] - scores["reference"]
    )


def inner_search(device, zc, yc, optimiser="calbench", profile=False) -> None:
    """`select_and_fit` as ``calbench run`` calls it (36 points, 5 inner folds, warm starts
    along the grid path), each fit's seconds, steps and gradient recorded; ``optimiser``
    "torch" runs the rounds by ``torch.optim.LBFGS`` instead (`_torch_lbfgs_rounds`), the
    reference for the device L-BFGS's speed. ``profile``: print where the host's time went
    (the fits' waits for the device included)."""
    import cProfile
    import pstats

    from calbench.calibrators.matrix.matrix_scaling import MatrixScaling
    from calbench.calibrators.solvers import preconditioned

    fits = []
    plain, rounds = MatrixScaling._fit, preconditioned.device_rounds

    def traced(model, logits, y):
        start = time.perf_counter()
        plain(model, logits, y)
        fits.append((time.perf_counter() - start, model.n_iter_, model.gradient_max_))

    MatrixScaling._fit = traced
    if optimiser == "torch":
        preconditioned.device_rounds = _torch_lbfgs_rounds
    profiler = cProfile.Profile() if profile else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if profiler:
                profiler.enable()
            _, seconds = timed_fit_model(_Search(device), zc, yc, device)
    finally:
        MatrixScaling._fit, preconditioned.device_rounds = plain, rounds
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    steps = [f[1] for f in fits]
    record(
        stage=f"inner search ({optimiser} L-BFGS)",
        device=device,
        seconds=seconds,
        fits=len(fits),
        fit_seconds=sum(f[0] for f in fits),
        steps=sum(steps),
        step_ms=1000 * sum(f[0] for f in fits) / max(sum(steps), 1),
        steps_max=max(steps),
        gradient_max=max(f[2] for f in fits),
        chosen=json.dumps(_Search.chosen),
    )


def _torch_lbfgs_rounds(in_weights, tol):
    """The device rounds as they were before `calbench.calibrators.device_lbfgs`: torch's
    own L-BFGS, with the same rules (it reads the device about 48 times a step)."""
    import torch

    from calbench.calibrators.solvers.device_lbfgs import DEVICE_ROUND_TOL

    def minimise(coordinates, a, value, grad, budget):  # noqa: ARG001 (evaluates its start)
        shape = a.shape
        theta = coordinates.theta(a).reshape(-1).clone()
        optimiser = torch.optim.LBFGS(
            [theta],
            lr=1.0,
            max_iter=budget,
            max_eval=budget * 5 // 4 + 1,
            tolerance_grad=tol * DEVICE_ROUND_TOL,
            tolerance_change=tol * 1e-6 * max(abs(value), 1.0),
            history_size=20,
            line_search_fn="strong_wolfe",
        )

        def closure():
            value, grad, _ = in_weights(coordinates.weights(theta.view(shape)))
            theta.grad = coordinates.gradient(grad).reshape(-1)
            return float(value)

        optimiser.step(closure)
        steps = int(optimiser.state[theta].get("n_iter", 0))
        return coordinates.weights(theta.view(shape)), steps, steps >= budget, None

    return minimise


class _Search:
    """A fit of `select_and_fit` for `timed_fit_model`."""

    chosen: dict = {}

    def __init__(self, device):
        self.device = device

    def fit(self, x, y):
        from calbench.runner.selection import select_and_fit

        model = make_calibrator("ms_odir", device=self.device)
        _, _Search.chosen = select_and_fit(model, GRID, x, y, inner_folds=5)
        return self


def timed_fit_model(model, x, y, device):
    """``(model fitted on x, y, its seconds)``, the device's queue drained at both ends."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, y)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return model, time.perf_counter() - start


def calbench_run(device, zc, yc, zt, yt, folder: Path) -> dict:
    import pandas as pd

    data = folder / "imagenet_shaped.npz"
    np.savez(data, logits_cal=zc, y_cal=yc, logits_test=zt, y_test=yt)
    results = folder / "results"
    command = [
        sys.executable,
        "-m",
        "calbench.cli",
        "run",
        f"dataset.path={data}",
        "dataset=npz",
        "dataset.name=imagenet_shaped",
        "method=ms_odir",
        "protocol.inner_folds=5",
        f"device={device}",
        f"results_dir={results}",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        print(done.stdout[-3000:], done.stderr[-3000:], flush=True)
        record(stage="calbench run", device=device, seconds=wall, failed=done.returncode)
        return {}
    rows = pd.concat(pd.read_csv(f) for f in (results / "store").glob("*.csv"))
    metric = rows.set_index("metric")
    chosen = json.loads(metric.loc["log_loss", "params"])
    record(
        stage="calbench run",
        device=device,
        seconds=wall,
        fit_seconds=float(metric.loc["log_loss", "fit_seconds"]),
        test_log_loss=float(metric.loc["log_loss", "value"]),
        accuracy=float(metric.loc["accuracy", "value"]),
        **chosen,
    )
    return {"chosen": chosen, "log_loss": float(metric.loc["log_loss", "value"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", default="imagenet", choices=["imagenet", "cifar100"])
    parser.add_argument("--stages", default="product,default,search,run,point,torchsearch")
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    import torch

    stages = set(args.stages.split(","))
    if args.device.startswith("cuda"):
        torch.ones(1, device=args.device).sum().item()  # the context, before any clock
        record(stage="machine", device=torch.cuda.get_device_name(), cpus=os.cpu_count())
    zc, yc, zt, yt = overconfident_logits(args.scale)
    record(stage="data", rows=len(zc), classes=zc.shape[1], torch=torch.__version__)
    try:
        if "product" in stages and args.device.startswith("cuda"):
            gemm_seconds(args.device, int(0.8 * len(zc)), zc.shape[1])
        if "default" in stages:
            twice = [args.device, args.device]  # the second with kernels and handles warm
            default_fits(twice, zc, yc, zt, yt, profile="profile" in stages)
        if "stepprofile" in stages:
            step_profile(args.device, zc, yc, {"reg_lambda": 1000.0, "reg_mu": 1000.0})
        if "cpudefault" in stages:
            default_fits(["cpu"], zc, yc, zt, yt)
        if "search" in stages:
            inner_search(args.device, zc, yc, profile="searchprofile" in stages)
        if "run" in stages:
            with tempfile.TemporaryDirectory() as folder:
                cell = calbench_run(args.device, zc, yc, zt, yt, Path(folder))
            if cell and "refit" in stages:
                model, seconds = timed_fit("cpu", zc, yc, **cell["chosen"])
                cpu = log_loss(model.predict_proba(zt), yt)
                record(
                    stage="chosen point on the cpu",
                    device="cpu",
                    seconds=seconds,
                    steps=model.n_iter_,
                    test_log_loss=cpu,
                    difference=cell["log_loss"] - cpu,
                )
        if "point" in stages:
            one_point(args.device, zc, yc, zt, yt, {"reg_lambda": 1000.0, "reg_mu": 1000.0})
        if "torchsearch" in stages:
            inner_search(args.device, zc, yc, optimiser="torch")
    finally:
        print(write_results(RECORDS, args.out, "gpu", "ms_odir on a GPU at ImageNet shape"))


if __name__ == "__main__":
    main()
