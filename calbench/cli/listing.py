"""``calbench list``: its arguments; the work is `calbench.listing`'s."""

from __future__ import annotations

import argparse
import json

from tabulate import tabulate

import calbench.listing as service


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench list",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("kind", choices=service.KINDS)
    parser.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    args = parser.parse_args(argv)
    records = service.catalogue(args.kind)
    if args.json:
        print(json.dumps(records, indent=1))
    else:
        print(tabulate(records, headers="keys", tablefmt="plain"))
