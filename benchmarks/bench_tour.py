"""The README's tour, timed: each command of its table (read from the README itself) in a
fresh folder, one after the other, as a newcomer types them.

    python benchmarks/bench_tour.py [--out results/bench]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _tour() -> list[str]:
    """The README's tour (its one source), without the leading ``calbench``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests
    from tests.test_readme_tour import tour_commands

    return [c.split(" ", 1)[1] for c in tour_commands()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    lines = ["| command | seconds |", "|---|---|"]
    total = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for command in _tour():
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "calbench.cli", *shlex.split(command)],
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
