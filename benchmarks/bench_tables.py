"""Table building from a large results store: read, supersede check, rank and render.

    python benchmarks/bench_tables.py [--rows 1000000]

Writes a synthetic store shaped like a big Kull-style sweep (cells of data set x
classifier x method, 25 folds x 20 metrics each, with their config YAML beside them, as
`calbench run` writes them), then times `ResultStore.read` and `write_tables` for the
kull_uci layouts over it. Writes <out>/tables.csv and <out>/tables.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import write_results  # noqa: E402
from calbench.results.store import COLUMNS, ResultStore  # noqa: E402
from calbench.tables.write import table_specs, write_tables  # noqa: E402

METHODS = ["uncal", "dir_l2", "beta", "histbin_freq", "isotonic", "histbin_width", "ts"]
CLASSIFIERS = [
    "adas",
    "forest",
    "knn",
    "lda",
    "logistic",
    "mlp",
    "nbayes",
    "qda",
    "tree",
    "svc-linear",
    "svc-rbf",
]
METRICS = [
    "accuracy", "log_loss", "brier", "mce", "confidence_ece", "classwise_ece",
    "p_conf_ece", "p_cw_ece", *[f"extra_{i}" for i in range(12)],
]  # fmt: skip
FOLDS = 25


def write_store(root: Path, n_rows: int, seed: int = 0) -> int:
    """Cells until ``n_rows`` rows; returns the number of cells."""
    rng = np.random.default_rng(seed)
    store = ResultStore(root)
    per_cell = FOLDS * len(METRICS)
    n_cells = -(-n_rows // per_cell)
    fold = np.repeat(np.arange(FOLDS), len(METRICS))
    metric = np.tile(METRICS, FOLDS)
    for cell in range(n_cells):
        method = METHODS[cell % len(METHODS)]
        classifier = CLASSIFIERS[(cell // len(METHODS)) % len(CLASSIFIERS)]
        dataset = f"set{cell // (len(METHODS) * len(CLASSIFIERS))}"
        rows = pd.DataFrame(
            {
                "experiment": "kull_uci",
                "dataset": dataset,
                "classifier": classifier,
                "method": method,
                "criterion": "nll",
                "loss": "zero_one",
                "shift": "none",
                "protocol": "classifier_cv",
                "fold": fold,
                "metric": metric,
                "value": rng.random(per_cell),
                "fit_seconds": 1.0,
                "params": "{}",
                "config_hash": f"{cell:016x}",
                "seed": 0,
                "calbench_version": "bench",
                "predictions_sha256": "",  # no arrays stored beside these rows
            }
        )
        config = {"experiment": "kull_uci", "dataset": {"name": dataset}, "method": method}
        store.write(f"{cell:016x}", rows[COLUMNS], yaml.safe_dump(config))
    return n_cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="calbench-bench-tables-"))
    try:
        start = time.perf_counter()
        n_cells = write_store(root, args.rows)
        written = time.perf_counter() - start
        start = time.perf_counter()
        rows = ResultStore(root).read()
        read = time.perf_counter() - start
        specs = [s for s in table_specs().values() if s["experiment"] == "kull_uci"]
        start = time.perf_counter()
        paths = write_tables(root, "kull_uci", formats=("md", "tex", "csv"), echo=False)
        tables = time.perf_counter() - start
    finally:
        shutil.rmtree(root, ignore_errors=True)
    record = {
        "rows": len(rows),
        "cells": n_cells,
        "write_store_seconds": written,
        "read_store_seconds": read,
        "tables": len(specs),
        "files_written": len(paths),
        "write_tables_seconds": tables,
    }
    print(write_results([record], args.out, "tables", "Table building from a large store"))


if __name__ == "__main__":
    main()
