"""Whole paper presets as a user runs them: wall time from an empty results folder, with
each method's fit time (fitting and grid selection, summed over its cells and folds, from
the store; prediction, metrics and Hydra's start-up are in the wall time only).

    python benchmarks/bench_presets.py [--data-dir data] [--presets valk_synthetic,...]

Each preset runs as ``calbench run experiment=PRESET`` in a child process (Hydra starts
fresh, as for a user) into a temporary results folder; presets whose data are absent from
``--data-dir`` are listed as skipped. The classifier-score cache of kull_uci is kept in
``--data-dir`` as a user's would be, so its second run is faster: pass an empty data
folder with the files installed for a from-scratch figure. Writes <out>/presets.csv and
<out>/presets.md. ``--one-job`` also runs each preset with ``hydra.launcher.n_jobs=1`` (the
cells one by one, as sweeps ran before the parallel launcher was the default) and reports
the ratio of the two wall times, measured in the same session.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calbench.data.install import usable  # noqa: E402
from calbench.results.store import ResultStore  # noqa: E402

#: preset -> (extra overrides, the data set that must be present, or None)
PRESETS = {
    "valk_synthetic": ((), None),
    "hoki_ece_offline": ((), None),
    "valk_real": (("dataset=c10_densenet40",), "c10_densenet40"),
    "gupta_ks": (("dataset=c10_densenet40",), "c10_densenet40"),
    "kull_deepnet": (("dataset=c10_densenet40",), "c10_densenet40"),
    "kull_uci": ((), "uci_iris"),
}


def present(dataset: str | None, data_dir: str) -> bool:
    return dataset is None or not usable([dataset], data_dir)


def run_preset(preset: str, overrides, data_dir: str, results: Path) -> float:
    command = [
        sys.executable,
        "-m",
        "calbench.cli",
        "run",
        f"experiment={preset}",
        *overrides,
        f"data_dir={data_dir}",
        f"results_dir={results}",
    ]
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{preset} failed:\n{out.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="data")
    # kull_uci (16 min on 2 cores from empty caches, twice that with --one-job) only when
    # asked for: --presets kull_uci.
    parser.add_argument("--presets", default=",".join(p for p in PRESETS if p != "kull_uci"))
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--one-job", action="store_true", help="also time n_jobs=1")
    args = parser.parse_args()
    rows, skipped = [], []
    for preset in [p for p in args.presets.split(",") if p]:
        overrides, needs = PRESETS[preset]
        if not present(needs, args.data_dir):
            skipped.append(f"{preset} ({needs} absent from {args.data_dir})")
            continue
        if args.one_job:
            with tempfile.TemporaryDirectory() as tmp:
                one = run_preset(
                    preset, (*overrides, "hydra.launcher.n_jobs=1"), args.data_dir, Path(tmp)
                )
            rows.append({"preset": preset, "method": "(wall time, one job)", "seconds": one})
        with tempfile.TemporaryDirectory() as tmp:
            wall = run_preset(preset, overrides, args.data_dir, Path(tmp))
            stored = ResultStore(tmp).read(preset)
        fit = stored.groupby(["method", "config_hash", "fold"])["fit_seconds"].first()
        per_method = fit.groupby(level="method").sum().sort_values(ascending=False)
        rows.append({"preset": preset, "method": "(wall time, every core)", "seconds": wall})
        rows += [{"preset": preset, "method": m, "seconds": s} for m, s in per_method.items()]
        print(f"{preset}: {wall:.1f} s wall; slowest fits: {per_method.head(3).round(1).to_dict()}")
        if args.one_job:
            print(f"{preset}: one job {one:.1f} s, every core {wall:.1f} s ({one / wall:.2f}x)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "presets.csv", index=False)
    lines = [
        "## Paper presets: wall time, and fit + selection time per method",
        "",
        "Wall time from an empty results folder; a method's seconds are its fitting and grid",
        "selection summed over cells and folds (prediction and metrics are in the wall time).",
        "",
    ]
    for preset, group in frame.groupby("preset", sort=False) if rows else []:
        lines += [f"### {preset}", "", "| method | seconds |", "|---|---|"]
        lines += [
            f"| {m} | {s:.1f} |" for m, s in zip(group["method"], group["seconds"], strict=True)
        ]
        lines.append("")
    if skipped:
        lines.append("Skipped: " + "; ".join(skipped) + ".")
    (out / "presets.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'presets.md'}")


if __name__ == "__main__":
    main()
