"""``calbench tables``: its arguments; the work is `calbench.tables.write`'s."""

from __future__ import annotations

import argparse

import calbench.tables.write as service
from calbench.errors import CalbenchError
from calbench.plots.write import risk_curve_files
from calbench.tables.render import RENDERERS


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="calbench tables", description=service.__doc__)
    parser.add_argument("--results-dir", default="results", help="default: results")
    parser.add_argument("--experiment", help="only this experiment's tables")
    parser.add_argument("--formats", default="md,tex,csv", help="default: md,tex,csv")
    args = parser.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(RENDERERS))
    if unknown:
        raise CalbenchError(f"Unknown table format(s) {unknown}; known: {sorted(RENDERERS)}.")
    for path in service.write_tables(
        args.results_dir, args.experiment, formats, draw_curve=risk_curve_files
    ):
        print(f"wrote {path}")
