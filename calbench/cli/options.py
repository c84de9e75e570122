"""Command-line options more than one command takes (imported by ``calbench run`` too, so
it imports nothing heavy at its top)."""

from __future__ import annotations

#: The results store's folder when a command is given none (the run config's own default
#: is ``results_dir: results`` in ``calbench/conf/config.yaml``).
RESULTS_DIR = "results"


def add_results_dir_option(parser) -> None:
    """--results-dir: the results store the command reads or writes."""
    parser.add_argument("--results-dir", default=RESULTS_DIR, help=f"default: {RESULTS_DIR}")


def results_dir_of(overrides: list[str]) -> str:
    """The ``results_dir`` a ``calbench run`` command line gives (``results_dir=``,
    ``+results_dir=`` or ``++results_dir=``, the last one winning), else the default."""
    given = [
        a.split("=", 1)[1] for a in overrides if a.split("=", 1)[0].lstrip("+") == "results_dir"
    ]
    return given[-1] if given else RESULTS_DIR


def add_paired_bootstrap_options(parser) -> None:
    """--alpha, --resamples, --bootstrap-seed: the paired bootstrap of a task's test points."""
    from calbench.stats.bootstrap import DEFAULT_RESAMPLES

    parser.add_argument("--alpha", type=float, default=0.05, help="interval level 1-alpha")
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help="1000")
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="the resamples' seed")


def paired_bootstrap_settings(args):
    """The `calbench.stats.bootstrap.BootstrapSettings` of `add_paired_bootstrap_options`."""
    from calbench.stats.bootstrap import BootstrapSettings

    return BootstrapSettings(args.resamples, args.bootstrap_seed, True, args.alpha)
