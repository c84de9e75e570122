"""``calbench figures``: its arguments; the work is `calbench.plots.write`'s."""

from __future__ import annotations

import argparse

from matplotlib.backend_bases import FigureCanvasBase

import calbench.plots.write as service
from calbench.cli.options import add_results_dir_option
from calbench.errors import CalbenchError
from calbench.stats.bootstrap import BootstrapSettings


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench figures",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--experiment", help="one experiment (default: every experiment in the store)"
    )
    add_results_dir_option(parser)
    parser.add_argument("--formats", default="png,pdf")
    parser.add_argument(
        "--metrics", default="log_loss,classwise_ece", help="metrics for CD diagrams"
    )
    parser.add_argument(
        "--methods",
        help="comma-separated methods (default: the leaderboard's top 3 by log-loss with TS "
        "and uncalibrated; the rest are named as left out)",
    )
    parser.add_argument(
        "--max-tasks",
        type=int,
        default=None,
        help="per-task figures for at most this many tasks (default: all)",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="reliability diagrams with each bar's 95%% bootstrap interval (1000 resamples "
        "of the stored test predictions, stratified by label)",
    )
    args = parser.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    known = FigureCanvasBase.get_supported_filetypes()
    unknown = sorted(set(formats) - set(known))
    if unknown:  # before any work, not after
        raise CalbenchError(
            f"Unknown figure format(s) {unknown}; matplotlib writes: {', '.join(sorted(known))}."
        )
    experiments = (
        [args.experiment] if args.experiment else service.stored_experiments(args.results_dir)
    )
    for experiment in experiments:
        try:
            paths = service.write_figures(
                experiment,
                args.results_dir,
                formats,
                [m for m in args.metrics.split(",") if m],
                [m for m in (args.methods or "").split(",") if m] or None,
                args.max_tasks,
                BootstrapSettings() if args.ci else None,
            )
        except CalbenchError as exc:
            if args.experiment:
                raise
            print(f"skipped {experiment}: {exc}")  # the others are still drawn
            continue
        for path in paths:
            print(f"wrote {path}")
