"""Command-line options more than one command takes."""

from __future__ import annotations

from calbench.stats.bootstrap import DEFAULT_RESAMPLES, BootstrapSettings


def add_paired_bootstrap_options(parser) -> None:
    """--alpha, --resamples, --bootstrap-seed: the paired bootstrap of a task's test points."""
    parser.add_argument("--alpha", type=float, default=0.05, help="interval level 1-alpha")
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="1000")
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="the resamples' seed")


def paired_bootstrap_settings(args) -> BootstrapSettings:
    return BootstrapSettings(args.resamples, args.bootstrap_seed, True, args.alpha)
