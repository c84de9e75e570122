"""Venn-Abers (method=venn_abers / venn_abers_ovr) against the venn-abers package's
pre-fitted multiclass predictor, same process, same data, at CIFAR-10 and CIFAR-100 scale.

    python benchmarks/bench_venn_abers.py [--scales cifar10,cifar100]

Times fit + predict of both, one-vs-one and one-vs-rest, and reports the largest
difference of their probabilities (the package orders saturated probability ratios by
ties where calbench uses logit differences, so one-vs-one can differ where ratios reach
1.0 in float64). Writes <out>/venn_abers.csv and <out>/venn_abers.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import overconfident_logits, write_results  # noqa: E402
from calbench.calibrators import make_calibrator  # noqa: E402
from calbench.simplex import softmax  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="cifar10,cifar100")
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    from venn_abers.venn_abers import predict_proba_prefitted_va

    records = []
    for scale in args.scales.split(","):
        zc, yc, zt, _ = overconfident_logits(scale)
        for multiclass in ("one_vs_one", "one_vs_rest"):
            start = time.perf_counter()
            ours = make_calibrator("venn_abers", multiclass=multiclass).fit(zc, yc)
            ours = ours.predict_proba(zt)
            calbench_seconds = time.perf_counter() - start
            start = time.perf_counter()
            package, _ = predict_proba_prefitted_va(softmax(zc), yc, softmax(zt), va_tpe=multiclass)
            package_seconds = time.perf_counter() - start
            records.append(
                {
                    "scale": scale,
                    "n_cal": len(zc),
                    "n_test": len(zt),
                    "n_classes": zc.shape[1],
                    "multiclass": multiclass,
                    "calbench_seconds": calbench_seconds,
                    "package_seconds": package_seconds,
                    "speedup": package_seconds / calbench_seconds,
                    "max_abs_difference": float(abs(ours - package).max()),
                }
            )
            print(records[-1], flush=True)
    print(write_results(records, args.out, "venn_abers", "Venn-Abers against venn-abers"))


if __name__ == "__main__":
    main()
