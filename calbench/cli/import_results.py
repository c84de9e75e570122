"""``calbench import LAYOUT DIR``: its arguments; the layouts and their readers are the
paper packs' (`calbench.results.importers`)."""

from __future__ import annotations

import argparse

from calbench.cli.options import add_results_dir_option
from calbench.results.importers import IMPORTERS


def _first_paragraph(function) -> str:
    return " ".join((function.__doc__ or "").strip().split("\n\n")[0].split())


def main(argv: list[str]) -> None:
    layouts = {name: IMPORTERS[name] for name in IMPORTERS}
    parser = argparse.ArgumentParser(
        prog="calbench import",
        description="Read a benchmark's published per-task results into the store, so "
        "leaderboard, tables and report work on them as on calbench's own runs.\n\nLayouts:\n"
        + "\n".join(f"  {name}: {_first_paragraph(f)}" for name, f in layouts.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=sorted(layouts), help="the published results' layout")
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
    summary = layouts[args.format](args.source, args.results_dir, args.collection)
    for experiment, (tasks, methods) in summary.items():
        print(
            f"{experiment}: {tasks} tasks x {methods} methods (published results; "
            f"calbench leaderboard {experiment} --metric brier)"
        )
