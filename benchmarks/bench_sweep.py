"""A sweep's bookkeeping per cell: everything a cell costs besides its fit, its metrics and
its data load (composing its config, planning, checking the store, writing its rows,
config and predictions, printing its summary).

    python -m benchmarks.bench_sweep [--cells 2000] [--hydra-cells 200] --out DIR

Runs ``calbench run -m method=uncal seed=range(0,N)`` on 300 calibration and 300 test rows
in this process on one job, once with the launcher's cached composition (the default) and
once with ``hydra.launcher.compose=hydra`` (Hydra composes and runs each job, as before),
into empty results folders. The fit time comes from the store, the metrics and data-load
times from timers around `FoldPredictions.scores` and `load_configured_dataset`; the
overhead is the launch's wall time less those, per cell. Writes <out>/sweep.csv and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time

from benchmarks._data import write_results


class _Timer:
    """Seconds spent inside a wrapped function, summed."""

    def __init__(self, owner, name):
        self.owner, self.name, self.seconds = owner, name, 0.0
        self.original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(owner, name, timed)

    def restore(self):
        setattr(self.owner, self.name, self.original)


def sweep(cells: int, compose: str) -> dict:
    """One sweep of ``cells`` trivial cells; its wall time and the parts that are not
    bookkeeping."""
    from hydra.core.plugins import Plugins

    from calbench import atomic
    from calbench.cli import main
    from calbench.results.predictions import FoldPredictions
    from calbench.results.store import ResultStore
    from calbench.runner import job, plan, predictions

    Plugins.instance()  # Hydra's plugin scan loads the launcher's module anew: scan first
    from hydra_plugins.calbench_launcher.calbench_launcher import CalbenchLauncher

    timers = [
        _Timer(FoldPredictions, "scores"),
        _Timer(plan, "load_configured_dataset"),
        _Timer(CalbenchLauncher, "launch"),
        # Writing files (temporary file, write, fsync, rename) waits on the file system,
        # whose latency on a shared machine swung it between 6 and 12 ms a cell from run to
        # run: reported apart. The two names under which the store writes:
        _Timer(atomic, "atomic_write_bytes"),  # through atomic_write_text
        _Timer(predictions, "atomic_write_bytes"),
    ]
    assert job  # imported before the clock starts, as it is after a sweep's first cell
    with tempfile.TemporaryDirectory() as results:
        argv = [
            "run",
            "-m",
            "method=uncal",
            f"seed=range(0,{cells})",
            "dataset.n_cal=300",
            "dataset.n_test=300",
            f"results_dir={results}",
            "hydra.launcher.n_jobs=1",
            f"hydra.launcher.compose={compose}",
        ]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                main(argv)
        finally:
            for timer in timers:
                timer.restore()
        rows = ResultStore(results).read()
        fit = rows.groupby(["config_hash", "fold"])["fit_seconds"].first().sum()
        stored = rows["config_hash"].nunique()
    metrics, load, launch, *writes = (t.seconds for t in timers)
    overhead = launch - metrics - load - fit
    return {
        "compose": compose,
        "cells": stored,
        "wall_s": round(launch, 2),
        "fit_s": round(fit, 3),
        "metrics_s": round(metrics, 2),
        "data_load_s": round(load, 2),
        "overhead_ms_per_cell": round(1000 * overhead / stored, 1),
        "of_which_file_writes_ms": round(1000 * sum(writes) / stored, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--hydra-cells", type=int, default=200)
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    records = [sweep(args.cells, "cached")]
    if args.hydra_cells:
        records.append(sweep(args.hydra_cells, "hydra"))
        ratio = records[1]["overhead_ms_per_cell"] / records[0]["overhead_ms_per_cell"]
        records[0]["overhead_ratio_hydra_over_cached"] = round(ratio, 1)
    for record in records:
        print(record, flush=True)
    title = "A sweep's bookkeeping per cell (uncal, 300 + 300 rows, one job)"
    print(write_results(records, args.out, "sweep", title))


if __name__ == "__main__":
    main()
