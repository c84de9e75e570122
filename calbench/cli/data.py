"""``calbench data``: its arguments; the work is `calbench.data.install`'s."""

from __future__ import annotations

import argparse

from tabulate import tabulate

import calbench.data.install as service
from calbench.errors import CalbenchError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calbench data",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command", choices=["list", "fetch", "verify", "has", "present", "tasks", "example"]
    )
    parser.add_argument(
        "names",
        nargs="*",
        help="data set names for fetch (or all) and has; a preset for present; an HDF5 "
        "benchmark file for tasks; a folder for example (default: here)",
    )
    tasks_options = parser.add_argument_group(
        "tasks FILE: the file's tasks as one sweep value (dataset.task=...), filtered by"
    )
    tasks_options.add_argument("--min-classes", type=int)
    tasks_options.add_argument("--max-classes", type=int)
    tasks_options.add_argument("--max-rows", type=int, help="calibration plus test rows")
    tasks_options.add_argument("--dataset", action="append", help="data set name (repeatable)")
    tasks_options.add_argument(
        "--table", action="store_true", help="a table of the tasks with their shapes instead"
    )
    parser.add_argument("--data-dir", default="data")
    parser.add_argument(
        "--wide",
        action="store_true",
        help="list: every column (papers, checksums, sources and licences too)",
    )
    parser.add_argument(
        "--from",
        dest="source_dir",
        default=None,
        help="fetch: copy the files from this local folder instead of downloading them",
    )
    return parser


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    SUBCOMMANDS[args.command](args)


def _list(args) -> None:
    """The registered data sets, one row each (``--wide``: every column)."""
    rows, headers = service.list_sets(args.data_dir), service.LIST_HEADERS
    if not args.wide:
        rows, headers = service.compact(rows)
    print(tabulate(rows, headers=headers))


def _has(args) -> None:
    """Exit 1, naming what is wrong, where a named data set cannot be used."""
    if not args.names:
        raise CalbenchError("Name the data sets to check: calbench data has NAME...")
    problems = service.usable(args.names, args.data_dir)
    for problem in problems:
        print(problem)
    if problems:
        raise SystemExit(1)


def _present(args) -> None:
    """The preset's data sets found in the data folder, comma-separated."""
    if len(args.names) != 1:
        raise CalbenchError("Name one preset: calbench data present PRESET")
    found = service.present_sets(args.names[0], args.data_dir)
    if not found:
        raise CalbenchError(
            f"None of {args.names[0]}'s data sets is in {args.data_dir}; fetch them "
            "(calbench data fetch NAME, or --from DIR)."
        )
    print(",".join(found))


def _tasks(args) -> None:
    """An HDF5 benchmark file's tasks, filtered, as one sweep value (or a table)."""
    if len(args.names) != 1:
        raise CalbenchError("Name one HDF5 file: calbench data tasks FILE")
    from calbench.data.hdf5 import tasks

    found = tasks(
        args.names[0],
        min_classes=args.min_classes,
        max_classes=args.max_classes,
        max_rows=args.max_rows,
        datasets=args.dataset,
    )
    if not found:
        raise CalbenchError(f"No task of {args.names[0]} passes the filters.")
    if args.table:
        rows = [(t.name, t.n_classes, t.n_cal, t.n_test) for t in found]
        print(tabulate(rows, headers=["task", "classes", "calibration", "test"]))
    else:
        print(",".join(t.name for t in found))


def _example(args) -> None:
    """Two made-up models' scores to try calbench on."""
    from calbench.data.example import write_example_models

    if len(args.names) > 1:
        raise CalbenchError("Name at most one folder: calbench data example [FOLDER]")
    paths = write_example_models(args.names[0] if args.names else ".")
    print(
        f"wrote {' and '.join(str(p) for p in paths)}: two made-up 4-class models' scores "
        "(1,500 calibration and 1,500 test rows each), standing for yours"
    )


def _fetch(args) -> None:
    """Download (or copy ``--from`` a folder) the named data sets, checked."""
    if not args.names:
        raise CalbenchError("Name the data sets to fetch (or all): calbench data fetch NAME")
    service.fetch(args.names, args.data_dir, source_dir=args.source_dir)


def _verify(args) -> None:
    """Check every fetched file against its published checksum."""
    problems = service.verify(args.data_dir)
    if problems:
        raise CalbenchError("; ".join(problems))


#: ``calbench data COMMAND`` -> what it does.
SUBCOMMANDS = {
    "list": _list,
    "fetch": _fetch,
    "verify": _verify,
    "has": _has,
    "present": _present,
    "tasks": _tasks,
    "example": _example,
}
