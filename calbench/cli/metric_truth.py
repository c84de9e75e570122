"""``calbench metric-truth``: the metric_truth study (`calbench.studies.metric_truth`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from calbench.cli.options import add_results_dir_option


def main(argv: list[str]) -> None:
    from calbench.studies import metric_truth as study

    parser = argparse.ArgumentParser(
        prog="calbench metric-truth",
        description=study.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--size",
        choices=sorted(study.SIZES),
        default="default",
        help="default: 2, 10 and 100 classes, 100 to 100,000 test rows (about 11 CPU-minutes); "
        "quick: 2 and 10 classes, 100 and 1,000 rows (under a minute)",
    )
    parser.add_argument("--seed", type=int, default=0, help="default: 0")
    parser.add_argument(
        "--rerun", action="store_true", help="draw again even where the rows are stored"
    )
    add_results_dir_option(parser)
    args = parser.parse_args(argv)
    import pandas as pd

    from calbench.atomic import atomic_write_text
    from calbench.studies.metric_truth_report import write_study

    out = Path(args.results_dir) / "metric_truth"
    stored = out / f"rows_{args.size}_seed{args.seed}.csv"
    start = time.perf_counter()
    if stored.is_file() and not args.rerun:
        rows = pd.read_csv(stored)
        print(f"read {stored} (--rerun draws again)")
    else:
        rows = study.run_study(study.SIZES[args.size], args.seed, progress=print)
        atomic_write_text(stored, rows.to_csv(index=False))
    command = f"calbench metric-truth --size {args.size} --seed {args.seed}"
    for path in write_study(rows, out, command):
        print(f"wrote {path}")
    print((out / "metric_truth.md").read_text().split("## RMSE")[0].strip())
    print(f"Run time: {time.perf_counter() - start:.0f} s")
