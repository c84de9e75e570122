"""``calbench reproduce``: its arguments; the work is `calbench.reproduce.run`'s."""

from __future__ import annotations

import argparse

import calbench.reproduce.run as service
from calbench.cli.options import add_results_dir_option
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
        "--ci",
        action="store_true",
        help="beside each number, the 95%% spread of calbench's estimate over resampled "
        "test sets (bootstrap from the stored predictions, recentred on the estimate) and "
        "whether the printed number lies in it",
    )
    return parser


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    run = False if args.no_run else ("if-present" if args.if_present else True)
    names = service.presets_of_all() if args.preset == "all" else (args.preset,)
    if args.preset == "all" and run is True:
        run = "if-present"
    for name in names:
        done = service.reproduce(
            name,
            args.data_dir,
            args.results_dir,
            args.source_dir if name == names[0] else None,
            run=run,
            procedures="none" if args.fast else args.procedures,
            # A printed number is the same estimator on the same test set: compared with
            # the spread of calbench's estimate, not with the population error's interval.
            intervals=BootstrapSettings(method="recentred") if args.ci else None,
        )
        if done is None:
            continue
        path, lines = done
        print(f"wrote {path} and {path.with_suffix('.csv')}")
        for line in lines:
            print(line)
    index, overview = write_index(args.results_dir)
    print(f"wrote {index}")
    print(overview)
