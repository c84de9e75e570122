"""``calbench claims``: its arguments; the work is `calbench.reproduce.claims`'s."""

from __future__ import annotations

import argparse
from pathlib import Path

import calbench.reproduce.claims as service
from calbench.atomic import atomic_write_text
from calbench.cli.options import (
    add_paired_bootstrap_options,
    add_results_dir_option,
    paired_bootstrap_settings,
)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="calbench claims",
        description=service.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("experiment")
    add_results_dir_option(parser)
    add_paired_bootstrap_options(parser)
    args = parser.parse_args(argv)
    settings = paired_bootstrap_settings(args)
    checked = service.check_claims(args.results_dir, args.experiment, settings=settings)
    text = service.to_markdown(args.experiment, checked, settings)
    print(text)
    out = Path(args.results_dir) / "claims"
    for path, content in (
        (out / f"{args.experiment}.md", text),
        (out / f"{args.experiment}.csv", checked.to_csv(index=False)),
    ):
        atomic_write_text(path, content)
        print(f"wrote {path}")
