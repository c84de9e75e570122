"""``calbench store verify [--repair]``: its arguments; the work is
`calbench.results.verify`'s."""

from __future__ import annotations

import argparse

import calbench.results.verify as service
from calbench.cli.options import add_results_dir_option


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench store",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=["verify"])
    add_results_dir_option(parser)
    parser.add_argument(
        "--repair",
        action="store_true",
        help="move damaged cells to store/damaged/ (the next run recomputes them) and remove "
        "killed writers' temporary files",
    )
    args = parser.parse_args(argv)
    problems, counts = service.verify(args.results_dir)
    print(
        f"checked {counts['cells']} cell(s) and {counts['shared arrays']} shared arrays "
        f"file(s) in {args.results_dir}/store"
        + (
            f"; {counts['unsealed']} cell(s) stored by an earlier calbench carry no checksum "
            "(checked for their shape only)"
            if counts["unsealed"]
            else ""
        )
    )
    for problem in problems:
        print(f"  {problem.path}: {problem.reason}")
    if not problems:
        print("no problems found")
        return
    if not args.repair:
        print(f"{len(problems)} problem(s); `calbench store verify --repair` acts on them.")
        raise SystemExit(1)
    for line in service.repair(args.results_dir, problems):
        print(f"  {line}")
    print(f"{len(problems)} problem(s) repaired; rerun the sweeps to recompute moved cells.")
