"""knn_kl and kernel_dir at CIFAR-100 scale against a per-sample loop, same process.

    python benchmarks/bench_neighbourhood.py [--scale cifar100] [--loop-samples 200]

The loop is Valk 3.3-3.4 written one test point at a time (numpy over the calibration set
inside, as the thesis' code finds KL neighbours), timed on a subsample and extrapolated to
the whole test set; its outputs on the subsample are checked equal to ours. For the
Dirichlet kernel also the thesis code's other pattern: one scipy density call per
calibration point. Also reported: the one (n_test x n_cal x k) matrix
product both methods need, the floor for any implementation.
Writes <out>/neighbourhood.csv and <out>/neighbourhood.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import overconfident_logits, write_results  # noqa: E402
from calbench.calibrators import make_calibrator  # noqa: E402
from calbench.simplex import log_softmax, softmax  # noqa: E402


def loop_predict(name, param, p_cal, y_cal, p_test, epsilon):
    log_cal = np.log(p_cal)
    errors = p_cal - np.eye(p_cal.shape[1])[y_cal]
    out = np.empty_like(p_test)
    for i, p in enumerate(p_test):
        if name == "knn_kl":
            d = (p * (np.log(p) - log_cal)).sum(axis=1)
            w = np.zeros(len(p_cal))
            w[np.argsort(d)[:param]] = 1.0 / param
        else:
            log_w = (log_cal * p).sum(axis=1) / param
            w = np.exp(log_w - log_w.max())
            w /= w.sum()
        q = np.clip(p - w @ errors, epsilon, 1 - epsilon)
        out[i] = q / q.sum()
    return out


def scipy_density_loop_seconds(p_cal, p_test, bandwidth, n_sub):
    """The thesis code's pattern for the Dirichlet kernel: one scipy density call per
    calibration point (over all test points), timed on ``n_sub`` points, extrapolated."""
    from scipy.stats import dirichlet

    start = time.perf_counter()
    for q in p_cal[:n_sub]:
        dirichlet.logpdf(p_test.T, q / bandwidth + 1)
    return (time.perf_counter() - start) * len(p_cal) / n_sub


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cifar100")
    parser.add_argument("--loop-samples", type=int, default=200)
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    zc, yc, zt, yt = overconfident_logits(args.scale)
    p_cal, p_test = softmax(zc), softmax(zt)
    start = time.perf_counter()
    _ = p_test @ log_softmax(zc).T
    matmul = time.perf_counter() - start

    records = []
    for name, param_name, param in (
        ("knn_kl", "n_neighbors", 512),
        ("kernel_dir", "bandwidth", 0.1),
    ):
        cal = make_calibrator(name, **{param_name: param})
        start = time.perf_counter()
        ours = cal.fit(zc, yc).predict_proba(zt)
        seconds = time.perf_counter() - start
        scipy_loop = (
            scipy_density_loop_seconds(p_cal, p_test, param, 50)
            if name == "kernel_dir"
            else float("nan")
        )
        sub = slice(0, args.loop_samples)
        start = time.perf_counter()
        looped = loop_predict(name, param, p_cal, yc, p_test[sub], cal.epsilon_)
        loop_seconds = (time.perf_counter() - start) * len(zt) / args.loop_samples
        records.append(
            {
                "method": name,
                "parameter": f"{param_name}={param}",
                "n_cal": len(zc),
                "n_test": len(zt),
                "n_classes": zc.shape[1],
                "calbench_seconds": seconds,
                "loop_seconds_extrapolated": loop_seconds,
                "speedup": loop_seconds / seconds,
                "scipy_density_loop_seconds_extrapolated": scipy_loop,
                "speedup_vs_scipy_density_loop": scipy_loop / seconds,
                "matmul_seconds": matmul,
                "ratio_to_matmul": seconds / matmul,
                "max_abs_difference": float(np.abs(ours[sub] - looped).max()),
            }
        )
        print(records[-1], flush=True)
    text = write_results(records, args.out, "neighbourhood", "knn_kl / kernel_dir fit + predict")
    print(text)


if __name__ == "__main__":
    main()
