"""ODIR at 100 classes: the preconditioned L-BFGS of ms_odir / dir_odir against plain
L-BFGS on the same objective, same data, same process, with a long plain run as reference.

    python benchmarks/bench_odir_grid.py --data-dir DATA [--reference]

On netcal's CIFAR-100 records where present in DATA (their probabilities in float32, so
``ln p`` reaches -84: the case issue 57 measured), else on seeded 5000 x 100 logits whose
probabilities are rounded to float32. For each (lambda, mu) of the papers' grid corners and
middle: seconds and L-BFGS steps of each solver, the ratio, the objective each reaches and
its largest gradient entry; with ``--reference``, the gap of each objective to a plain run
with ``tol=1e-12`` and 30,000 steps (minutes a point). Writes <out>/odir_grid.csv and .md.

``--grid`` instead runs each method's whole inner-CV search as ``calbench run ...
protocol.inner_folds=5`` does (the papers' 36 points x 5 folds, warm-started from the
strongest penalty down), once per ``--preconditioners`` (``blocks``, the default, and
``rows``, the rank-one model alone, before 2026-11-28): its seconds, the 181 fits' steps,
how many stopped at the 2,000-step limit, and their largest gradient entry. Writes
<out>/odir_search.csv and .md.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import overconfident_logits, write_results  # noqa: E402
from calbench.calibrators import make_calibrator  # noqa: E402
from calbench.data import load_dataset  # noqa: E402
from calbench.simplex import softmax  # noqa: E402

NETWORKS = {
    "c100_densenet_bc100_netcal": "densenet-bc-100-cifar-100.npz",
    "c100_lenet5_netcal": "lenet-5-cifar-100.npz",
    "c100_wrn16_4_netcal": "wideresnet-16-4-cifar-100.npz",
}
POINTS = [(0.01, 0.01), (1.0, 1.0), (1000.0, 0.1), (1000.0, 1000.0)]


def data_sets(data_dir: Path):
    """(name, calibration logits, labels) of each netcal record present, or the seeded set."""
    found = []
    for name, file in NETWORKS.items():
        if (data_dir / file).is_file():
            data = load_dataset(
                "npz",
                path=data_dir / file,
                keys={"probs": "predictions", "y": "ground_truth"},
                split={"cal_size": 0.5, "seed": 0},
            )
            found.append((name, data.logits_cal, data.y_cal))
    if not found:
        z, y, _, _ = overconfident_logits("cifar100")
        probs = softmax(z).astype(np.float32).astype(np.float64)
        found.append(("seeded 5000 x 100, float32 p", np.log(np.clip(probs, 1e-38, None)), y))
    return found


def timed_fit(method, x, y, **params):
    model = make_calibrator(method, **params)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y)
    seconds = time.perf_counter() - start
    return model, seconds, any("before converging" in str(w.message) for w in caught)


def _gradient_max(model, x, y) -> float:
    """The largest entry of the objective's gradient at the fitted map (in its weights)."""
    params = {"coef_": model.coef_, "intercept_": model.intercept_}
    out = model._forward(params, model._fitting_features(x))
    from calbench.criteria import get_criterion

    _, grad_out = get_criterion("nll")(out, y)
    grads = model._backward(params, model._fitting_features(x), out, grad_out)
    _, penalty = model._penalty(params)
    return max(float(np.abs(grads[n] + penalty.get(n, 0.0)).max()) for n in grads)


GRID = {
    "reg_lambda": [1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0],
    "reg_mu": [1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0],
}


def search(name, method, x, y, preconditioner) -> dict:
    """The inner-CV search of ``method`` on (x, y), each fit traced."""
    from calbench.calibrators.matrix.matrix_scaling import MatrixScaling
    from calbench.runner.selection import select_and_fit

    fits = []
    plain = MatrixScaling._fit

    def traced(model, logits, labels):
        plain(model, logits, labels)
        fits.append((model.n_iter_, getattr(model, "gradient_max_", np.nan)))

    MatrixScaling._fit = traced
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            calibrator = make_calibrator(method, preconditioner=preconditioner)
            _, chosen = select_and_fit(calibrator, GRID, x, y, inner_folds=5)
            seconds = time.perf_counter() - start
    finally:
        MatrixScaling._fit = plain
    steps = [f[0] for f in fits]
    return {
        "data": name,
        "method": method,
        "preconditioner": preconditioner,
        "seconds": seconds,
        "fits": len(fits),
        "steps": sum(steps),
        "steps_max": max(steps),
        "at_step_limit": sum(s >= 2000 for s in steps),
        "gradient_max": float(np.nanmax([f[1] for f in fits])),
        **chosen,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--methods", default="ms_odir,dir_odir")
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--grid", action="store_true")
    parser.add_argument("--preconditioners", default="blocks,rows")
    args = parser.parse_args()
    records = []
    if args.grid:
        for name, x, y in data_sets(Path(args.data_dir)):
            for method in args.methods.split(","):
                for preconditioner in args.preconditioners.split(","):
                    records.append(search(name, method, x, y, preconditioner))
                    print(records[-1], flush=True)
        print(write_results(records, args.out, "odir_search", "ODIR's inner-CV search"))
        return
    for name, x, y in data_sets(Path(args.data_dir)):
        for method in args.methods.split(","):
            for lam, mu in POINTS:
                fast, fast_s, fast_short = timed_fit(method, x, y, reg_lambda=lam, reg_mu=mu)
                plain, plain_s, plain_short = timed_fit(
                    method, x, y, reg_lambda=lam, reg_mu=mu, solver="lbfgs"
                )
                row = {
                    "data": name,
                    "method": method,
                    "reg_lambda": lam,
                    "reg_mu": mu,
                    "preconditioned_seconds": fast_s,
                    "preconditioned_steps": fast.n_iter_,
                    "preconditioned_objective": fast.loss_,
                    "preconditioned_gradient_max": fast.gradient_max_,
                    "preconditioned_stopped_short": fast_short,
                    "plain_seconds": plain_s,
                    "plain_steps": plain.n_iter_,
                    "plain_objective": plain.loss_,
                    "plain_gradient_max": _gradient_max(plain, x, y),
                    "plain_stopped_short": plain_short,
                    "speedup": plain_s / fast_s,
                }
                if args.reference:
                    reference, _, _ = timed_fit(
                        method,
                        x,
                        y,
                        reg_lambda=lam,
                        reg_mu=mu,
                        solver="lbfgs",
                        tol=1e-12,
                        max_iter=30000,
                    )
                    row["reference_objective"] = reference.loss_
                    row["preconditioned_minus_reference"] = fast.loss_ - reference.loss_
                    row["plain_minus_reference"] = plain.loss_ - reference.loss_
                records.append(row)
                print(
                    {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()},
                    flush=True,
                )
    print(write_results(records, args.out, "odir_grid", "ODIR at 100 classes: solvers"))


if __name__ == "__main__":
    main()
