"""``calbench report``: its arguments; the work is `calbench.report`'s."""

from __future__ import annotations

import argparse

import calbench.report as service


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="calbench report", description=service.__doc__)
    parser.add_argument("experiment")
    parser.add_argument("--results-dir", default="results")
    args = parser.parse_args(argv)
    print(f"wrote {service.write_report(args.experiment, args.results_dir)}")
