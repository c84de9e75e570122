"""``calbench tables``: its arguments; the work is `calbench.tables.write`'s."""

from __future__ import annotations

import argparse

import calbench.tables.write as service
from calbench.cli.options import add_results_dir_option
from calbench.errors import CalbenchError
from calbench.plots.write import risk_curve_files
from calbench.stats.bootstrap import DEFAULT_RESAMPLES, BootstrapSettings
from calbench.tables.render import RENDERERS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calbench tables",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_results_dir_option(parser)
    parser.add_argument("--experiment", help="only this experiment's tables")
    parser.add_argument("--formats", default="md,tex,csv", help="default: md,tex,csv")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="bootstrap intervals of every value from the stored predictions, and a mark (†) "
        "on methods not distinguishable from their row's best (paired)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="--ci level 1-alpha; 0.05")
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="--ci: 1000")
    parser.add_argument(
        "--interval", default="percentile", help="percentile (default), bca or recentred"
    )
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="--ci resamples' seed")
    parser.add_argument(
        "--no-stratify", action="store_true", help="--ci: resample ignoring the labels"
    )
    parser.add_argument(
        "--fitted",
        action="store_true",
        help="also each cell's chosen grid point and small learned parameters (TS's "
        "temperature, VS's vectors, ODIR's strengths): tables/EXPERIMENT_fitted.md",
    )
    return parser


def _intervals(args) -> BootstrapSettings | None:
    """The bootstrap of ``--ci`` and its options (None without it)."""
    if not args.ci:
        return None
    return BootstrapSettings(
        args.resamples, args.bootstrap_seed, not args.no_stratify, args.alpha, args.interval
    )


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    intervals = _intervals(args)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(RENDERERS))
    if unknown:
        raise CalbenchError(f"Unknown table format(s) {unknown}; known: {sorted(RENDERERS)}.")
    written = service.write_tables(
        args.results_dir,
        args.experiment,
        formats,
        draw_curve=risk_curve_files,
        intervals=intervals,
    )
    folders = sorted({str(p.parent) for p in written})
    print(f"wrote {len(written)} file(s) in {', '.join(folders)}")
    # One table on the terminal, the log-loss one where there is one: the files hold all.
    shown = [p for p in written if p.suffix == ".md" and p.stem.endswith("_log_loss")]
    if shown:
        print(f"\n{shown[0]}:\n{shown[0].read_text()}")
    if args.fitted:
        from calbench.plots.write import stored_experiments
        from calbench.tables.fitted import write_fitted

        for experiment in (
            [args.experiment] if args.experiment else stored_experiments(args.results_dir)
        ):
            print(f"wrote {write_fitted(args.results_dir, experiment)}")
