"""The whole CalArena arena's shape, timed: calbench against CalArena's published fit times.

    python -m benchmarks.bench_arena_shapes --calarena DIR [--per-collection 4]
        [--max-published-s 30] [--protocol-tasks 1] [--largest-peak] --out DIR

CalArena publishes, for each of its 1,791 tasks and each method, the seconds its fit and
predict took (``<Method>_time`` in ``results/<collection>/<Method>.csv``; ``DIR`` holds that
``results/`` folder). Its scores are not here, so each sampled task gets synthetic scores of
its exact shape (calibration and test rows, classes; binary collections two), drawn so
the calibrators do real work (`over_confident`: too sharp and biased logits, labels drawn
from the true probabilities), as float32 probabilities as CalArena stores them.

1. **Defaults, method by method.** Per collection, ``--per-collection`` tasks at evenly
   spaced quantiles of their size (rows x classes), the largest always among them; each of
   CalArena's methods there under calbench's name for CalArena's definition
   (`calbench.papers.calarena2026.published_results.METHODS`), fitted on the calibration
   part and predicting the test part, timed as CalArena times it. A (task, method) whose
   published time exceeds ``--max-published-s`` is left out (CatBoost's largest take 80 min).
   The ratio calbench / CalArena per task, and its median per method.
2. **The whole arena.** Each method's published seconds over all 1,791 tasks, times its
   median ratio: calbench's CPU time for CalArena's defaults-only panel.
3. **Full protocol.** calbench's arena presets choose each grid by 10-fold inner CV on the
   calibration part (``arena_*``: holdout, ``inner_folds: 10``). On ``--protocol-tasks`` of
   the sampled tasks per collection, each method of the preset runs as one ``calbench run``
   cell in a child process (its wall time and peak memory measured there); the full
   protocol's cost over a defaults fit, per method, scales the arena's defaults estimate.
   Wall time on N nodes of C cores: the CPU time over N x C, but never under the longest
   single cell.
4. **Peak memory at the largest shape** (``--largest-peak``): each of `LARGEST_METHODS` at
   its defaults on the largest sampled task, one child process each.

Writes ``<out>/arena_shapes_tasks.csv`` (every timed pair), ``arena_shapes.csv`` and
``arena_shapes.md`` (per method), and prints the estimate.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._data import write_results
from calbench.calibrators import make_calibrator
from calbench.data.synthetic import sample_labels
from calbench.papers.calarena2026.published_results import METHODS, OWN_VARIANTS
from calbench.results.store import ResultStore
from calbench.simplex import float32_softmax, probs_to_logits, softmax

#: One cell in a child process that reports its own peak resident memory (kB) last: the
#: high-water mark of its own memory (VmHWM), since getrusage's ru_maxrss survives exec and
#: would report this parent's peak (every cell of the 2026-11-29 run read 3,325 MB).
CHILD = (
    "import sys\n"
    "from calbench.cli import main\n"
    "try:\n    main(sys.argv[1:])\n"
    "finally:\n"
    "    status = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
    "    print(f'PEAK_KB {status}', file=sys.stderr)\n"
)

#: calbench's arena presets, per collection kind.
PRESETS = {"multiclass": "arena_tabrepo_multiclass", "binary": "arena_tabrepo_binary"}
#: A preset method -> the CalArena method whose published seconds it is scaled from.
TWINS = {
    **{ours: theirs for theirs, ours in METHODS.items()},
    **{ours: theirs for theirs, ours in OWN_VARIANTS.items()},
    "isotonic": "Isotonic", "venn_abers": "Venn-Abers", "cdf_spline": "CDF-Spline",
    "beta": "Beta", "ms_odir": "MS",
}  # fmt: skip


def published_tasks(results: Path) -> pd.DataFrame:
    """One row per (collection, task, method): shape and published seconds."""
    rows = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.csv")):
            method = path.stem
            frame = pd.read_csv(path)
            if f"{method}_time" not in frame:
                continue
            k = frame["n_classes"] if "n_classes" in frame else 2
            rows.append(
                pd.DataFrame(
                    {
                        "collection": folder.name,
                        "task": frame["dataset"] + " / " + frame["model"],
                        "n_cal": frame["cal_size"],
                        "n_test": frame["test_size"],
                        "classes": k,
                        "calarena_method": method,
                        "calarena_s": frame[f"{method}_time"],
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def sample_tasks(tasks: pd.DataFrame, per_collection: int) -> pd.DataFrame:
    """Per collection, tasks at evenly spaced quantiles of rows x classes, the largest
    always among them."""
    shapes = tasks.drop_duplicates(["collection", "task"]).copy()
    shapes["work"] = (shapes["n_cal"] + shapes["n_test"]) * shapes["classes"]
    picked = []
    for _, group in shapes.sort_values("work").groupby("collection", sort=True):
        at = np.unique(np.linspace(0, len(group) - 1, min(per_collection, len(group))).round())
        picked.append(group.iloc[at.astype(int)])
    return pd.concat(picked, ignore_index=True)


def over_confident(n_cal: int, n_test: int, k: int, seed: int):
    """Float32 probabilities of an over-confident model and labels drawn from the truth:
    the true posteriors ``softmax(u)`` favour one class a row, the model reports
    ``softmax(2.5 u + bias)``."""
    rng = np.random.default_rng(seed)
    n = n_cal + n_test
    u = rng.normal(size=(n, k)).astype(np.float64)
    u[np.arange(n), rng.integers(0, k, n)] += np.log(k) + 1.5
    y = sample_labels(softmax(u), rng)
    z = probs_to_logits(float32_softmax(2.5 * u + rng.normal(scale=0.5, size=k)))
    return z[:n_cal], y[:n_cal], z[n_cal:], y[n_cal:]


def time_defaults(tasks: pd.DataFrame, sample: pd.DataFrame, max_published: float) -> pd.DataFrame:
    """calbench's seconds for each sampled (task, CalArena method) at CalArena's defaults."""
    out, warmed = [], set()
    for seed, shape in enumerate(sample.itertuples()):
        zc, yc, zt, _ = over_confident(shape.n_cal, shape.n_test, shape.classes, seed)
        own = tasks[(tasks["collection"] == shape.collection) & (tasks["task"] == shape.task)]
        for row in own.itertuples():
            name = METHODS.get(row.calarena_method)
            if name is None or name == "uncal":
                continue
            entry = {
                "collection": shape.collection, "task": shape.task, "n_cal": shape.n_cal,
                "n_test": shape.n_test, "classes": shape.classes, "method": name,
                "calarena_method": row.calarena_method, "calarena_s": row.calarena_s,
            }  # fmt: skip
            if row.calarena_s > max_published:
                out.append({**entry, "calbench_s": np.nan, "note": "published time over the cap"})
                continue
            if name not in warmed:
                _warm(name)
                warmed.add(name)
            try:
                started, cpu = time.perf_counter(), _cpu_seconds()
                make_calibrator(name).fit(zc, yc).predict_proba(zt)
                wall = time.perf_counter() - started
                seconds = {"calbench_s": _cpu_seconds() - cpu, "calbench_wall_s": wall}
                out.append({**entry, **seconds, "note": ""})
            except Exception as exc:  # an optional package missing, say
                out.append({**entry, "calbench_s": np.nan, "note": f"{type(exc).__name__}: {exc}"})
            print(
                f"  {shape.collection} {shape.task} {name}: {out[-1]['calbench_s']:.3g} s",
                flush=True,
            )
    return pd.DataFrame(out)


def _cpu_seconds() -> float:
    """CPU seconds of this process (all its threads) and of the pinned float32 fits' child
    (`calbench.papers.calarena2026.pinned_arithmetic`), read from /proc. CalArena ran each
    job on one CPU, where its wall time is its CPU time; CPU time here is also what a
    machine shared with other jobs measures without their interference."""
    total = time.process_time()
    from calbench.papers.calarena2026 import pinned_arithmetic

    child = pinned_arithmetic._WORKER.process
    if child is not None and child.poll() is None:
        fields = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _peak_kb(stderr: str) -> float:
    lines = [line for line in stderr.splitlines() if line.startswith("PEAK_KB ")]
    return float(lines[-1].split()[1]) if lines else np.nan


def _warm(name: str) -> None:
    """One untimed fit on a small set first: a library's start-up (numba's compilation,
    a first import) is paid once per process, not per task."""
    zc, yc, zt, _ = over_confident(200, 100, 3, 0)
    try:
        make_calibrator(name).fit(zc, yc).predict_proba(zt)
    except Exception:  # timed (and its error noted) below
        pass


#: Peak memory at the arena's largest shape (ImageNet, 25,000 + 25,000 rows x 1,000 classes):
#: the methods CalArena ran there, and the full-matrix maps calbench's arena presets add.
LARGEST_METHODS = (
    "histbin_uniform_prior", "histbin_quantile_prior", "isotonic_calarena", "cir", "ts",
    "ets", "vs_logp", "svs", "sms", "dir_odir", "ms_odir",
)  # fmt: skip

#: One default fit and prediction in a child process: its CPU seconds and its own peak.
FIT_CHILD = (
    "import sys, time, numpy as np\n"
    "from calbench.calibrators import make_calibrator\n"
    "data = np.load(sys.argv[2])\n"
    "fit = make_calibrator(sys.argv[1]).fit(data['logits_cal'], data['y_cal'])\n"
    "fit.predict_proba(data['logits_test'])\n"
    "status = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
    "print(f'PEAK_KB {status} CPU_S {time.process_time()}', file=sys.stderr)\n"
)


def peak_at_largest(sample: pd.DataFrame, folder: Path, timeout: float = 900) -> pd.DataFrame:
    """Each of `LARGEST_METHODS` at its defaults on the sample's largest task, one child
    process each: the peak resident memory a SLURM cell of that task must request (an
    inner-CV grid adds its fold slices, about rows x classes x 8 bytes)."""
    shape = sample.sort_values(["work", "n_cal"]).iloc[-1]
    zc, yc, zt, yt = over_confident(int(shape.n_cal), int(shape.n_test), int(shape.classes), 99)
    path = folder / "largest.npz"
    np.savez(path, logits_cal=zc, y_cal=yc, logits_test=zt, y_test=yt)
    out = []
    for method in LARGEST_METHODS:
        try:
            run = subprocess.run(
                [sys.executable, "-c", FIT_CHILD, method, str(path)],
                capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            out.append({"method": method, "peak_mb": np.nan, "cpu_s": np.nan, "note": "timeout"})
            continue
        if run.returncode != 0:
            raise SystemExit(f"{method} on {shape.task} failed:\n{run.stderr[-2000:]}")
        fields = run.stderr.split("PEAK_KB ")[-1].split()
        out.append({"method": method, "peak_mb": float(fields[0]) / 1024,
                    "cpu_s": float(fields[2]), "note": ""})  # fmt: skip
        print(f"  largest {shape.task} {method}: {out[-1]['peak_mb']:.0f} MB", flush=True)
    return pd.DataFrame(out).assign(task=shape.task, n_cal=shape.n_cal, classes=shape.classes)


def _preset_methods(preset: str) -> list[str]:
    from calbench.conf_files import read_group, swept_values

    return swept_values(read_group("experiment")[preset], "method")


def time_protocol(
    sample: pd.DataFrame, per_collection: int, max_work: float, folder: Path
) -> pd.DataFrame:
    """Each preset method as one ``calbench run`` cell in a child process, on the
    ``per_collection`` smallest sampled tasks of each collection up to ``max_work`` (rows x
    classes; ImageNet's 50,000 x 1,000 would take hours on a laptop): wall seconds and peak
    resident memory of the child."""
    out = []
    small = sample[sample["work"] <= max_work].sort_values("work")
    small = small.groupby("collection").head(per_collection)
    for seed, shape in enumerate(small.itertuples()):
        zc, yc, zt, yt = over_confident(shape.n_cal, shape.n_test, shape.classes, 1000 + seed)
        path = folder / f"task{seed}.npz"
        np.savez(path, logits_cal=zc, y_cal=yc, logits_test=zt, y_test=yt)
        kind = "binary" if shape.collection.endswith("binary") else "multiclass"
        metrics = "calarena_binary" if kind == "binary" else "calarena"
        for method in _preset_methods(PRESETS[kind]):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            run = subprocess.run(
                [sys.executable, "-c", CHILD, "run", "dataset=npz",
                 f"dataset.path={path}", f"dataset.name=t{seed}", "protocol=holdout",
                 f"metrics={metrics}", f"method={method}", f"results_dir={folder / 'r'}",
                 "predictions=none"],
                capture_output=True, text=True, cwd=folder,
            )  # fmt: skip
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if run.returncode != 0:  # a cell that failed would time its own error message
                raise SystemExit(f"{method} on {shape.task} failed:\n{run.stderr[-2000:]}")
            out.append(
                {
                    "collection": shape.collection, "task": shape.task, "method": method,
                    "dataset": f"t{seed}", "calarena_method": TWINS.get(method, ""),
                    "n_cal": shape.n_cal, "classes": shape.classes, "cell_s": wall,
                    "cpu_s": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
                    "peak_mb": _peak_kb(run.stderr) / 1024,
                    "ok": run.returncode == 0,
                }
            )  # fmt: skip
            print(f"  protocol {shape.task} {method}: {wall:.1f} s", flush=True)
    frame = pd.DataFrame(out)
    rows = ResultStore(folder / "r").read().drop_duplicates(["dataset", "method", "fold"])
    fits = rows.groupby(["dataset", "method"])["fit_seconds"].sum()
    keys = zip(frame["dataset"], frame["method"], strict=True)
    frame["fit_s"] = [fits.get(key, np.nan) for key in keys]
    return frame


def protocol_estimate(tasks: pd.DataFrame, protocol: pd.DataFrame, cores: int = 1) -> pd.DataFrame:
    """Per preset method: its full-protocol fit over its CalArena twin's published seconds
    on the same tasks (median), and that ratio times the twin's seconds over the arena."""
    published = tasks.set_index(["collection", "task", "calarena_method"])["calarena_s"]
    keys = zip(protocol["collection"], protocol["task"], protocol["calarena_method"], strict=True)
    protocol = protocol.assign(twin_s=[published.get(k, np.nan) for k in keys])
    protocol["ratio"] = protocol["fit_s"] / protocol["twin_s"].clip(lower=1e-4)
    per = protocol.groupby("method").agg(
        twin=("calarena_method", "first"),
        median_ratio=("ratio", "median"),
        longest_cell_s=("cell_s", "max"),
        peak_mb=("peak_mb", "max"),
    )
    twin_hours = tasks.groupby("calarena_method")["calarena_s"].sum() / 3600
    per["arena_h"] = per["twin"].map(twin_hours) * per["median_ratio"]
    return per


def _longest_fit_hours(longest: pd.Series, ratio) -> float:
    """The longest single cell calbench would run, in hours: each CalArena method's longest
    published fit times calbench's median ratio for it (1 where none was measured)."""
    scaled = [seconds * ratio.get(method, 1.0) for method, seconds in longest.items()]
    return max(scaled) / 3600 if scaled else 0.0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calarena", type=Path, required=True, help="holds results/<collection>/")
    parser.add_argument("--per-collection", type=int, default=4)
    parser.add_argument("--max-published-s", type=float, default=30.0)
    parser.add_argument("--protocol-tasks", type=int, default=1)
    parser.add_argument("--protocol-max-work", type=float, default=2e6, help="rows x classes")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reuse", action="store_true", help="summarise <out>'s earlier timings")
    parser.add_argument(
        "--reuse-defaults", action="store_true",
        help="keep <out>'s defaults-panel timings and rerun only the full-protocol cells",
    )  # fmt: skip
    parser.add_argument(
        "--largest-peak", action="store_true",
        help="also measure each method's peak memory on the largest sampled task",
    )  # fmt: skip
    args = parser.parse_args(argv)
    tasks = published_tasks(args.calarena / "results")
    sample = sample_tasks(tasks, args.per_collection)
    print(f"{tasks['task'].nunique()} tasks published; {len(sample)} sampled", flush=True)
    reused = args.reuse and (args.out / "arena_shapes_protocol.csv").is_file()
    if reused or args.reuse_defaults:  # the timings of an earlier run, summarised again
        timed = pd.read_csv(args.out / "arena_shapes_tasks.csv")
    else:
        timed = time_defaults(tasks, sample, args.max_published_s)
    timed["ratio"] = timed["calbench_s"] / timed["calarena_s"].clip(lower=1e-4)
    per_method = timed.groupby("method").agg(
        pairs=("calbench_s", "count"),
        median_ratio=("ratio", "median"),
        calbench_s=("calbench_s", "sum"),
        calarena_s=("calarena_s", lambda s: s[timed.loc[s.index, "calbench_s"].notna()].sum()),
    )
    arena = tasks.assign(method=tasks["calarena_method"].map(METHODS)).dropna(subset=["method"])
    published_hours = arena.groupby("method")["calarena_s"].sum() / 3600
    per_method["arena_calarena_h"] = published_hours
    per_method["arena_calbench_h"] = published_hours * per_method["median_ratio"]
    if reused:
        protocol = pd.read_csv(args.out / "arena_shapes_protocol.csv")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            protocol = time_protocol(sample, args.protocol_tasks, args.protocol_max_work, Path(tmp))
    full = protocol_estimate(tasks, protocol)
    args.out.mkdir(parents=True, exist_ok=True)
    timed.to_csv(args.out / "arena_shapes_tasks.csv", index=False)
    protocol.to_csv(args.out / "arena_shapes_protocol.csv", index=False)
    write_results(
        per_method.reset_index().to_dict("records"), args.out, "arena_shapes",
        "calbench at CalArena's defaults against CalArena's published fit + predict seconds",
    )  # fmt: skip
    write_results(
        full.reset_index().to_dict("records"), args.out, "arena_shapes_full_protocol",
        "calbench's full protocol (grids by 10-fold inner CV) against the same published seconds",
    )  # fmt: skip
    print(per_method.round(3).to_string())
    print(full.round(3).to_string())
    if args.largest_peak:
        with tempfile.TemporaryDirectory() as tmp:
            largest = peak_at_largest(sample, Path(tmp))
        largest.to_csv(args.out / "arena_shapes_largest_peak.csv", index=False)
        print(largest.round(1).to_string())
    cpu_h = full["arena_h"].sum()
    longest = tasks.groupby("calarena_method")["calarena_s"].max()
    print(
        f"defaults panel: CalArena {per_method['arena_calarena_h'].sum():.1f} h published, "
        f"calbench {per_method['arena_calbench_h'].sum():.1f} h; full protocol {cpu_h:.1f} CPU-h"
    )
    # No node count finishes before the longest single cell: CalArena's longest published
    # fits, times the full protocol's ratio for their method (the larger of two variants).
    ratio = full.dropna(subset=["median_ratio"]).groupby("twin")["median_ratio"].max()
    floor_h = _longest_fit_hours(longest, ratio)
    for nodes in (1, 10, 100):
        wall = max(cpu_h / (nodes * 32), floor_h)
        print(f"  {nodes} node(s) of 32 cores: {wall:.2f} h wall at best")
    print("  the longest published single fits:", longest.nlargest(3).round(0).to_dict())
    print(f"  calbench's longest single cell at full protocol, scaled: {floor_h:.2f} h")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one CPU a cell, as CalArena's jobs
    main()
