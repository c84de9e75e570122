"""Print each procedure twin's draws with its witnesses first, for a pack's sweep order.

After a run of every draw (``calbench reproduce PRESET --procedures every_draw``), the
witnesses are the fewest draws whose spread holds every number the store's full spread
holds (`calbench.reproduce.procedures.witness_draws`). Writing them first in the twin's
``method.params.seed`` (or ``.fold``, ...) sweep lets ``calbench reproduce`` (until_held)
verify those numbers in its first batches:

    python scripts/witness_draws.py valk_real --results-dir results
"""

from __future__ import annotations

import argparse

from calbench.reproduce.comparison import verified_bounds
from calbench.reproduce.procedures import witness_draws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("preset")
    parser.add_argument("--results-dir", default="results")
    args = parser.parse_args()
    bounds = verified_bounds(args.preset, args.results_dir)
    for twin, order in witness_draws(args.preset, args.results_dir).items():
        held = sum(method in twin_methods(twin) for method, *_ in bounds)
        print(f"{twin}: {held} held numbers; draws, witnesses first: {','.join(order)}")


def twin_methods(twin: str) -> set[str]:
    from calbench.conf_files import read_group, swept_values

    return set(swept_values(read_group("experiment")[twin], "method"))


if __name__ == "__main__":
    main()
