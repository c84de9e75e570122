"""The README's tour, timed: each command in a fresh folder, one after the other, as a
newcomer types them (two made-up 4-class models' scores stand for the user's own).

    python benchmarks/bench_tour.py [--out results/bench]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOUR = [
    "run",
    "run method=dir_odir",
    "run -m method=ts,vs,bcts,dir",
    "tables",
    "figures",
    "run -m method=ts,vs,dir_odir,knn_kl dataset=npz dataset.path=model_a.npz,model_b.npz "
    "results_dir=mine",
    "tables --results-dir mine",
    "store verify",
    "data list",
    "list methods",
]


def _models(folder: Path) -> None:
    rng = np.random.default_rng(0)
    for name, scale in (("model_a", 1.0), ("model_b", 2.5)):
        n, k = 3000, 4
        y = rng.integers(0, k, n)
        z = rng.normal(size=(n, k))
        z[np.arange(n), y] += 1.5
        z *= scale
        np.savez(folder / f"{name}.npz", logits_cal=z[:1500], y_cal=y[:1500],
                 logits_test=z[1500:], y_test=y[1500:])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    lines = ["| command | seconds |", "|---|---|"]
    total = 0.0
    with tempfile.TemporaryDirectory() as folder:
        _models(Path(folder))
        for command in TOUR:
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "calbench.cli", *command.split()],
                                  cwd=folder, capture_output=True, text=True)  # fmt: skip
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"calbench {command} failed:\n{done.stderr}")
            total += seconds
            lines.append(f"| `calbench {command}` | {seconds:.1f} |")
            print(lines[-1], flush=True)
    lines.append(f"| all | {total:.1f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tour.md").write_text("\n".join(lines) + "\n")
    print(lines[-1])


if __name__ == "__main__":
    main()
