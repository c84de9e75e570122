"""Held-out log-loss of every penalised map at its default strengths, against
uncalibrated and temperature scaling, on the ImageNet shape where defaults can do harm.

    python benchmarks/bench_defaults.py [--methods ms_odir,dir_odir,...] [--shape noisy]

``noisy`` is issue 42's case (25000 + 25000 rows, 1000 classes, logits N(0, 2) plus 8 on
the label, 23% of labels redrawn): every class alike, so what a map fits beyond one
temperature is noise. ``overconfident`` is the other benches' ImageNet shape (one shared
over-confidence and a per-class bias a map can learn). A default does no harm where its
log-loss is at most the uncalibrated one. Writes <out>/defaults.csv and defaults.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import (  # noqa: E402
    noisy_imagenet_logits,
    overconfident_logits,
    write_results,
)
from calbench.calibrators import make_calibrator  # noqa: E402
from calbench.metrics import log_loss  # noqa: E402
from calbench.simplex import softmax  # noqa: E402

#: The maps with penalties and default strengths (VS, unpenalised, is the reference).
METHODS = "ms_odir,dir_odir,dir_l2,svs,sms,vs"


def _data(shape: str):
    return noisy_imagenet_logits() if shape == "noisy" else overconfident_logits("imagenet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--shape", default="noisy", choices=["noisy", "overconfident"])
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    zc, yc, zt, yt = _data(args.shape)
    uncal = log_loss(softmax(zt), yt)
    records = [{"method": "uncal", "log_loss": uncal, "harm": 0.0, "seconds": 0.0}]
    for name in ["ts", *args.methods.split(",")]:
        start = time.perf_counter()
        cal = make_calibrator(name).fit(zc, yc)
        seconds = time.perf_counter() - start
        loss = log_loss(cal.predict_proba(zt), yt)
        row = {"method": name, "log_loss": loss, "harm": loss - uncal, "seconds": seconds}
        for attribute in ("reg_lambda_", "reg_mu_", "reg_diagonal_"):
            if hasattr(cal, attribute):
                row[attribute.rstrip("_")] = getattr(cal, attribute)
        records.append(row)
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    title = f"Default strengths at ImageNet shape ({args.shape}): held-out log-loss"
    print(write_results(records, args.out, f"defaults_{args.shape}", title))


if __name__ == "__main__":
    main()
