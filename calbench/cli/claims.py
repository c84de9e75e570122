"""``calbench claims``: its arguments; the work is `calbench.reproduce.claims`'s."""

from __future__ import annotations

import argparse
from pathlib import Path

import calbench.reproduce.claims as service
from calbench.atomic import atomic_write_text
from calbench.runner.bootstrap import DEFAULT_RESAMPLES, BootstrapSettings


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench claims",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment")
    parser.add_argument("--results-dir", default="results", help="default: results")
    parser.add_argument("--alpha", type=float, default=0.05, help="interval level 1-alpha")
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="1000")
    parser.add_argument("--bootstrap-seed", type=int, default=0)
    args = parser.parse_args(argv)
    settings = BootstrapSettings(args.resamples, args.bootstrap_seed, True, args.alpha)
    checked = service.check_claims(args.results_dir, args.experiment, settings=settings)
    text = service.to_markdown(args.experiment, checked, settings)
    print(text)
    out = Path(args.results_dir) / "claims"
    for path, content in (
        (out / f"{args.experiment}.md", text),
        (out / f"{args.experiment}.csv", checked.to_csv(index=False)),
    ):
        atomic_write_text(path, content)
        print(f"wrote {path}")
