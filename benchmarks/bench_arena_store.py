"""`calbench tables` and `calbench leaderboard` on a store of the arena's size.

    python -m benchmarks.bench_arena_store [--tasks 1579] [--methods 19] --out DIR

Writes a synthetic store shaped like CalArena's benchmark run through calbench: one cell
per (task, method), one hold-out fold, CalArena's metrics and calbench's default extras
(1579 tasks x 19 methods = 30,001 cells), each with its config YAML beside it as `calbench
run` writes them. Then runs, each in a child process as a user would, `calbench tables
--experiment arena` and `calbench leaderboard arena --no-paired` (the paired per-task
tests need stored predictions, which these cells do not have), and reports the wall time
and peak resident memory of each. Writes <out>/arena_store.csv and .md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._data import write_results
from calbench.results.store import COLUMNS, ResultStore
from calbench.yaml_text import dump_yaml

METRICS = [
    "accuracy", "log_loss", "brier", "confidence_ece", "classwise_ece", "mce", "ks_error",
    "fit_accuracy", "inner_classes_missing", "wrong_certainties",
]  # fmt: skip


def write_store(root: Path, tasks: int, methods: int, seed: int = 0) -> int:
    """One cell per (task, method); returns the number of cells."""
    rng = np.random.default_rng(seed)
    store = ResultStore(root)
    skill = rng.normal(size=methods)  # some methods better than others, as in an arena
    cells = 0
    for task in range(tasks):
        dataset = f"task{task:04d}"
        base = rng.random(len(METRICS))
        for m in range(methods):
            method = f"method{m:02d}"
            cell_hash = f"{task:08x}{m:08x}"
            values = base * (1 + 0.05 * skill[m] + 0.02 * rng.normal(size=len(METRICS)))
            rows = pd.DataFrame(
                {
                    "experiment": "arena",
                    "dataset": dataset,
                    "classifier": "none",
                    "method": method,
                    "criterion": "nll",
                    "loss": "zero_one",
                    "shift": "none",
                    "protocol": "holdout",
                    "fold": 0,
                    "metric": METRICS,
                    "value": values,
                    "fit_seconds": 0.1,
                    "params": "{}",
                    "config_hash": cell_hash,
                    "seed": 0,
                    "calbench_version": "bench",
                    "predictions_sha256": "",
                }
            )
            config = {"experiment": "arena", "dataset": {"name": dataset}, "method": method}
            store.write(cell_hash, rows[COLUMNS], dump_yaml(config))
            cells += 1
    return cells


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of ``calbench COMMAND`` in a child process."""
    start = time.perf_counter()
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "calbench.cli", *command],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"calbench {' '.join(command)} failed:\n{out.stderr[-2000:]}")
    peak_kb = int(out.stderr.strip().splitlines()[-1])
    return seconds, peak_kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1579)
    parser.add_argument("--methods", type=int, default=19)
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="calbench-bench-arena-"))
    try:
        start = time.perf_counter()
        cells = write_store(root, args.tasks, args.methods)
        written = time.perf_counter() - start
        records = []
        for name, command in (
            ("calbench tables", ["tables", "--experiment", "arena", "--results-dir", str(root)]),
            (
                "calbench leaderboard",
                ["leaderboard", "arena", "--no-paired", "--results-dir", str(root)],
            ),
        ):
            seconds, peak = timed(command)
            records.append(
                {
                    "command": name,
                    "cells": cells,
                    "rows": cells * len(METRICS),
                    "seconds": round(seconds, 1),
                    "peak_memory_MB": round(peak),
                    "store_written_s": round(written, 1),
                }
            )
            print(records[-1], flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    title = "tables and leaderboard on an arena-sized store (each command in a child process)"
    print(write_results(records, args.out, "arena_store", title))


if __name__ == "__main__":
    main()
