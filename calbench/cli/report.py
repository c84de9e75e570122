"""``calbench report``: its arguments; the work is `calbench.report`'s."""

from __future__ import annotations

import argparse

import calbench.report as service
from calbench.cli.options import add_results_dir_option
from calbench.report.html import DEFAULT_METRICS
from calbench.results.experiment import Results
from calbench.stats.bootstrap import BootstrapSettings


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench report",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment")
    add_results_dir_option(parser)
    parser.add_argument(
        "--ci",
        action="store_true",
        help="tables with bootstrap intervals and marks, as `calbench tables --ci` (defaults)",
    )
    parser.add_argument(
        "--html",
        action="store_true",
        help="also one self-contained web page (results/reports/EXPERIMENT.html): set-up, "
        "sortable leaderboards, tables, claims, figures and the cells, linked",
    )
    parser.add_argument(
        "--metric",
        action="append",
        help="the leaderboards shown (default: log_loss and classwise_ece); repeatable",
    )
    args = parser.parse_args(argv)
    intervals = BootstrapSettings() if args.ci else None
    results = Results(args.results_dir)  # read once, for every part of both pages
    if args.metric:
        service.check_metrics(results, args.experiment, args.metric)
    metrics = args.metric or list(DEFAULT_METRICS)
    parts = service.report_parts(args.experiment, results, metrics, intervals)
    print(f"wrote {service.write_report(args.experiment, args.results_dir, parts=parts)}")
    if args.html:
        from calbench.report.html import write_html_report

        path = write_html_report(args.experiment, args.results_dir, parts=parts)
        print(f"wrote {path}")
