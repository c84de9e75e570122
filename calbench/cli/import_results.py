"""``calbench import calarena DIR``: its arguments; the work is `calbench.reproduce.imported`'s."""

from __future__ import annotations

import argparse

import calbench.reproduce.imported as service
from calbench.cli.options import add_results_dir_option


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench import",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=["calarena"], help="the published results' layout")
    parser.add_argument(
        "source", help="a folder holding results/<collection>/<Method>.csv (or those folders)"
    )
    add_results_dir_option(parser)
    parser.add_argument(
        "--collection",
        action="append",
        help="only this collection (e.g. tabrepo-multiclass); repeatable; default: all",
    )
    args = parser.parse_args(argv)
    summary = service.import_calarena(args.source, args.results_dir, args.collection)
    for experiment, (tasks, methods) in summary.items():
        print(
            f"{experiment}: {tasks} tasks x {methods} methods (published results; "
            f"calbench leaderboard {experiment} --metric brier)"
        )
