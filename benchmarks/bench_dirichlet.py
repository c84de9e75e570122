"""Fit time of dir_odir and ms_odir against dirichletcal, same data, same process.

    python benchmarks/bench_dirichlet.py [--scales cifar100] [--reg-lambda 1e3 --reg-mu 1e3]
    python benchmarks/bench_dirichlet.py --scales imagenet --methods ms_odir --reg-lambda auto \
        --reg-mu auto --no-peer

Both fit Kull's ODIR objective at the same lambda and mu (dirichletcal's penalty is not
normalised, so it gets lambda / (k (k - 1)) and mu / k, which is the same objective up to
its reference-row parametrisation); ``auto`` is calbench's default strength for the shape,
which the peer then gets as numbers. Each row also gives temperature scaling's test
log-loss on the same data, the bar a matrix map should clear. Writes <out>/dirichlet.csv
and <out>/dirichlet.md.
dirichletcal needs Python >= 3.12 on PyPI; on 3.11 install it from its source with
``pip install --no-deps --ignore-requires-python DIR`` (and jax). Absent, it is skipped.
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
from calbench.metrics import log_loss  # noqa: E402
from calbench.simplex import log_softmax, softmax  # noqa: E402


def peer_fit(name, zc, yc, zt, reg_lambda, reg_mu):
    """dirichletcal's MultinomialRegression on log-probabilities (dir) or logits (ms)."""
    from dirichletcal.calib.multinomial import MultinomialRegression

    k = zc.shape[1]
    features = log_softmax if name == "dir_odir" else (lambda z: z)
    model = MultinomialRegression(
        method="Full", reg_lambda=reg_lambda / (k * (k - 1)), reg_mu=reg_mu / k
    )
    start = time.perf_counter()
    model.fit(features(zc), yc)
    seconds = time.perf_counter() - start
    return seconds, np.asarray(model.predict_proba(features(zt)))


def _strength(text: str):
    return text if text == "auto" else float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="cifar100")
    parser.add_argument("--methods", default="dir_odir,ms_odir")
    parser.add_argument("--reg-lambda", type=_strength, default=1e3)
    parser.add_argument("--reg-mu", type=_strength, default=1e3)
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--stem", default="dirichlet", help="file name of the results")
    args = parser.parse_args()
    try:
        import dirichletcal  # noqa: F401

        have_peer = not args.no_peer
    except ImportError:
        have_peer = False
        print("dirichletcal not installed: timing calbench only (see the module docstring).")

    records = []
    for scale in args.scales.split(","):
        zc, yc, zt, yt = overconfident_logits(scale)
        uncal = log_loss(softmax(zt), yt)
        ts = log_loss(make_calibrator("ts").fit(zc, yc).predict_proba(zt), yt)
        for name in args.methods.split(","):
            cal = make_calibrator(name, reg_lambda=args.reg_lambda, reg_mu=args.reg_mu)
            start = time.perf_counter()
            cal.fit(zc, yc)
            ours = time.perf_counter() - start
            row = {
                "scale": scale,
                "n_cal": len(yc),
                "n_classes": zc.shape[1],
                "method": name,
                "reg_lambda": cal.reg_lambda_,
                "reg_mu": cal.reg_mu_,
                "uncal_log_loss": uncal,
                "ts_log_loss": ts,
                "calbench_seconds": ours,
                "calbench_iterations": cal.n_iter_,
                "calbench_log_loss": log_loss(cal.predict_proba(zt), yt),
            }
            if have_peer:
                seconds, probs = peer_fit(name, zc, yc, zt, cal.reg_lambda_, cal.reg_mu_)
                row.update(
                    peer="dirichletcal",
                    peer_seconds=seconds,
                    peer_log_loss=log_loss(probs, yt),
                    speedup=seconds / ours,
                )
            records.append(row)
            print(
                {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True
            )

    text = write_results(records, args.out, args.stem, "dir_odir / ms_odir fit time")
    print(text)


if __name__ == "__main__":
    main()
