"""``calbench report``: its arguments; the work is `calbench.report`'s."""

from __future__ import annotations

import argparse

import calbench.report as service
from calbench.stats.bootstrap import BootstrapSettings


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench report",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment")
    parser.add_argument("--results-dir", default="results")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="tables with bootstrap intervals and marks, as `calbench tables --ci` (defaults)",
    )
    args = parser.parse_args(argv)
    intervals = BootstrapSettings() if args.ci else None
    print(f"wrote {service.write_report(args.experiment, args.results_dir, intervals)}")
