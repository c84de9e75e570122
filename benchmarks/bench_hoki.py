"""Hoki's design-time (fit) and runtime (predict) cost next to temperature scaling's, same
process, same data, at the papers' scales (Hoki Table 3: about 1 s on CIFAR-100).

    python benchmarks/bench_hoki.py [--scales cifar10,cifar100,imagenet]

Hoki runs as configured (method=hoki: M = 1000 noise vectors, the transformation search
over both families and 8 spreads on 1000 examples, 15 bins), and again with the chosen
noise fixed (Algorithm 1 alone, what Hoki Table 3 times). Reports the ratios to TS and the
test confidence-ECE (15 equal-width bins) of both.
Writes <out>/hoki.csv and <out>/hoki.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import overconfident_logits, write_results  # noqa: E402
from calbench.calibrators import make_calibrator  # noqa: E402
from calbench.metrics import confidence_ece  # noqa: E402


def timed(calibrator, zc, yc, zt):
    start = time.perf_counter()
    calibrator.fit(zc, yc)
    fitted = time.perf_counter()
    probs = calibrator.predict_proba(zt)
    return fitted - start, time.perf_counter() - fitted, probs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="cifar10,cifar100,imagenet")
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    records = []
    for scale in args.scales.split(","):
        zc, yc, zt, yt = overconfident_logits(scale)
        ts_fit, ts_predict, ts_probs = timed(make_calibrator("ts"), zc, yc, zt)
        hoki = make_calibrator("hoki")
        fit, predict, probs = timed(hoki, zc, yc, zt)
        fixed = make_calibrator("hoki", family=hoki.family_, spread=hoki.spread_)
        fixed_fit, _, _ = timed(fixed, zc, yc, zt[:1])
        records.append(
            {
                "scale": scale,
                "n_cal": len(zc),
                "n_test": len(zt),
                "n_classes": zc.shape[1],
                "hoki_fit_seconds": fit,
                "hoki_fixed_noise_fit_seconds": fixed_fit,
                "hoki_predict_seconds": predict,
                "ts_fit_seconds": ts_fit,
                "ts_predict_seconds": ts_predict,
                "fit_ratio_hoki_to_ts": fit / ts_fit,
                "fixed_noise_fit_ratio_to_ts": fixed_fit / ts_fit,
                "hoki_noise": f"{hoki.family_}({hoki.spread_:g})",
                "hoki_iterations": hoki.n_iter_,
                "hoki_test_ece": confidence_ece(probs, yt),
                "ts_test_ece": confidence_ece(ts_probs, yt),
            }
        )
        print(records[-1], flush=True)
    print(write_results(records, args.out, "hoki", "Hoki against temperature scaling"))


if __name__ == "__main__":
    main()
