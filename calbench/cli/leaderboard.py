"""``calbench leaderboard``: its arguments; the work is `calbench.tables.leaderboard`'s."""

from __future__ import annotations

import argparse
from pathlib import Path

import calbench.tables.leaderboard as service
from calbench.cli.options import (
    add_paired_bootstrap_options,
    add_results_dir_option,
    paired_bootstrap_settings,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calbench leaderboard",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment")
    parser.add_argument("--metric", action="append", help="default: log_loss; repeatable")
    add_results_dir_option(parser)
    parser.add_argument("--formats", default="md,tex,csv", help="default: md,tex,csv")
    add_paired_bootstrap_options(parser)
    parser.add_argument(
        "--no-paired", action="store_true", help="skip the paired per-task tests (faster)"
    )
    parser.add_argument(
        "--methods", help="comma-separated: only these methods (default: every method stored)"
    )
    parser.add_argument(
        "--beside",
        metavar="OTHER",
        help="also OTHER's methods on the same tasks, e.g. CalArena's imported published "
        "results (calarena_cv_binary) beside calbench's full protocol (arena_cv_binary)",
    )
    parser.add_argument(
        "--by",
        help="also a leaderboard per group of tasks: cal_size, test_size or n_classes (thirds "
        "of the tasks) or classifier",
    )
    return parser


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",")] if args.methods else None
    settings = paired_bootstrap_settings(args)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    out = Path(args.results_dir) / "leaderboards"
    from calbench.plots.leaderboard import leaderboard_cd_figure, win_rate_figure

    for metric in args.metric or ["log_loss"]:
        board = service.leaderboard(
            args.results_dir,
            args.experiment,
            metric,
            settings,
            not args.no_paired,
            methods,
            beside=args.beside,
        )
        print(service.to_markdown(board))
        for path in service.write_leaderboard(board, out, formats):
            print(f"wrote {path}")
        for path in win_rate_figure(board, out) + leaderboard_cd_figure(board, out):
            print(f"wrote {path}")
        if args.by:
            _write_by_group(args, board.experiment, metric, settings, methods, out)


def _write_by_group(args, experiment: str, metric: str, settings, methods, out: Path) -> None:
    """A leaderboard per group of tasks (``--by``), printed and written beside the others."""
    from calbench.atomic import atomic_write_text
    from calbench.tables.groups import groups_markdown, leaderboards_by

    boards = leaderboards_by(
        args.results_dir,
        args.experiment,
        metric,
        args.by,
        settings=settings,
        paired=not args.no_paired,
        methods=methods,
        beside=args.beside,
    )
    text = f"**{experiment} on {metric}, by {args.by}**\n\n" + groups_markdown(boards)
    print(text)
    path = out / f"{experiment}_{metric}_by_{args.by}.md"
    atomic_write_text(path, text)
    print(f"wrote {path}")
