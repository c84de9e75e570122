"""``calbench reproduce``: its arguments; the work is `calbench.reproduce.run`'s."""

from __future__ import annotations

import argparse
import sys
import time

import calbench.reproduce.run as service
from calbench.cli.options import add_results_dir_option
from calbench.reproduce.lanes import LANES
from calbench.reproduce.overview import write_index
from calbench.reproduce.procedures import MODES
from calbench.reproduce.published import presets
from calbench.stats.bootstrap import BootstrapSettings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calbench reproduce",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "preset",
        help=f"one of: {', '.join(presets())}; or all ({', '.join(service.presets_of_all())})",
    )
    parser.add_argument("--data-dir", default="data", help="default: data")
    add_results_dir_option(parser)
    parser.add_argument("--from", dest="source_dir", help="install the data from this folder")
    parser.add_argument(
        "--no-run", action="store_true", help="compare the stored cells only, run nothing"
    )
    parser.add_argument(
        "--procedures",
        choices=MODES,
        default="until_held",
        help="how to run the PRESET_procedure* twins, the papers' own procedures whose spreads "
        "verify the stated causes: until_held (default: seeds in doubling batches until the "
        "spread holds each printed number), every_draw (all their seeds), none; their "
        "stored cells are read either way",
    )
    parser.add_argument(
        "--fast", action="store_true", help="run no procedure twin (--procedures none)"
    )
    parser.add_argument(
        "--if-present",
        action="store_true",
        help="skip quietly (exit 0) when none of the preset's data sets is present",
    )
    parser.add_argument(
        "--lanes",
        type=int,
        default=LANES,
        help=f"how many stages (a preset's sweep, a procedure twin; of every preset with all) "
        f"run side by side (default {LANES}; their lines are led by the stage's name); 1 runs "
        "them one after another",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="beside each number, the 95%% spread of calbench's estimate over resampled "
        "test sets (bootstrap from the stored predictions, recentred on the estimate) and "
        "whether the printed number lies in it",
    )
    return parser


def main(argv: list[str]) -> None:
    try:
        _reproduce(_parser().parse_args(argv))
    except KeyboardInterrupt:
        # The running sweeps' children got the interrupt too; what they stored stays.
        print(
            "\ncalbench reproduce: interrupted. The cells already stored are kept: the same "
            "command goes on from them.",
            file=sys.stderr,
        )
        raise SystemExit(130) from None


def _reproduce(args) -> None:
    run = False if args.no_run else ("if-present" if args.if_present else True)
    names = service.presets_of_all() if args.preset == "all" else (args.preset,)
    if args.preset == "all" and run is True:
        run = "if-present"
    start = time.perf_counter()
    intervals = BootstrapSettings(method="recentred") if args.ci else None
    # A printed number is the same estimator on the same test set: compared with the
    # spread of calbench's estimate (--ci), not with the population error's interval.
    lanes = args.lanes if run else 1
    procedures = "none" if args.fast else args.procedures
    if args.preset == "all":
        ran = service.reproduce_many(
            names, args.data_dir, args.results_dir, args.source_dir, run, procedures, lanes
        )
        reports = [service.report(name, args.results_dir, intervals) for name in ran]
    else:
        done = service.reproduce(
            args.preset,
            args.data_dir,
            args.results_dir,
            args.source_dir,
            run=run,
            procedures=procedures,
            intervals=intervals,
            lanes=lanes,
        )
        reports = [done] if done else []
    for path, lines in reports:
        print(f"wrote {path} and {path.with_suffix('.csv')}")
        for line in lines:
            print(line)
    index, overview = write_index(args.results_dir)
    print(f"wrote {index}")
    print(overview)
    if run and args.preset == "all":
        minutes = (time.perf_counter() - start) / 60
        print(f"Run time: {minutes:.1f} minutes, {lanes} stage(s) at a time.")
