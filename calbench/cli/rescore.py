"""``calbench rescore``: its arguments; the work is `calbench.runner.rescore`'s."""

from __future__ import annotations

import argparse

import calbench.runner.rescore as service
from calbench.cli.options import add_results_dir_option
from calbench.errors import CalbenchError


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench rescore",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--experiment", help="one experiment (default: every stored cell)")
    add_results_dir_option(parser)
    parser.add_argument("--metrics", help="comma-separated metric names")
    parser.add_argument("--metrics-config", help="every metric of conf/metrics/NAME.yaml")
    args = parser.parse_args(argv)
    if bool(args.metrics) == bool(args.metrics_config):
        raise CalbenchError("rescore needs --metrics a,b,... or --metrics-config NAME (one).")
    metrics = (
        service.metric_options([m for m in args.metrics.split(",") if m])
        if args.metrics
        else service.config_metrics(args.metrics_config)
    )
    done, missing = service.rescore(args.results_dir, metrics, args.experiment)
    print(f"rescored {done} cell(s) with {', '.join(metrics)}")
    if missing:
        print(
            f"{len(missing)} cell(s) were stored without predictions (predictions=none, or by "
            f"an earlier calbench), e.g. {missing[0]}: rerun them with force=true."
        )
