"""The papers' own procedures (the ``PRESET_procedure*`` twins), run until they verify.

A stated cause is verified when the printed number lies inside the spread (lowest to highest
value, widened by half a printed unit and the number's stated tolerance) of the paper's
procedure over its configured seeds, folds or arithmetics
(`calbench.reproduce.spreads.Spread.holds`). The spread of a subset of those draws lies
inside the spread of all of them, so a number held by the first k draws is provably held by
all 40: ``until_held`` runs the draws in doubling batches (2, 2, 4, 8, ...), each
batch only for the methods with a number not yet held, and stops when every number is held
or the draws run out. A number that none holds costs every draw, as before; one held early
costs two. ``every_draw`` runs the whole sweep (the full spread, e.g. for a paper's table of
it).

A twin's configured draws may start with its *witnesses*: the fewest draws whose spread
held every number the twin verifies in a run of all of them (`witness_draws` finds them
from a store; a pack writes them first in its sweep, with the date of that run). On the
same arithmetic the first batches then hold every number; where another machine's
arithmetic moves a value off its printed number, the rest of the draws follow as before,
so the verdict never rests on the witnesses alone.
"""

from __future__ import annotations

import functools
from itertools import combinations

import numpy as np

from calbench.conf_files import read_group, swept_values
from calbench.reproduce.lanes import Stage, say
from calbench.reproduce.spreads import DRAWN, procedure_minutes, procedure_presets

#: How a reproduction runs the procedure twins.
MODES = ("until_held", "every_draw", "none")
#: Draws in the first batch: two give a spread; one gives a point.
FIRST_BATCH = 2
#: Witness sets up to this size are searched exactly (C(40, 4) = 91,390 subsets at most).
EXACT_COVER = 4


def procedure_stages(preset, present, data_dir, results_dir, mode: str, run_preset) -> list:
    """The preset's procedure twins on the present data sets each sweeps, as ``mode`` says
    (`MODES`): one `Stage` a twin, whose sweeps run by ``run_preset(twin, datasets,
    data_dir, results_dir, overrides)`` (`calbench.reproduce.run.run_preset`)."""
    configs = read_group("experiment")
    stages = []
    for twin in procedure_presets(preset):
        datasets = [d for d in present if d in swept_values(configs[twin], "dataset")]
        if not datasets or mode == "none":
            continue
        _, draws = swept_draws(configs[twin])
        run = functools.partial(
            _run_twin, preset, twin, datasets, data_dir, results_dir, mode, run_preset
        )
        # What its first batch costs (its pack's minutes for every draw, shared out):
        # the draws that usually run, the witnesses first.
        share = min(1.0, FIRST_BATCH / len(draws)) if draws and mode == "until_held" else 1.0
        stages.append(Stage(twin, (procedure_minutes(twin) or 0.0) * share, run))
    return stages


def _run_twin(preset, twin, datasets, data_dir, results_dir, mode, run_preset) -> None:
    """One twin's sweeps: all of it (``every_draw``, or a twin without draws), or its draws
    in doubling batches for the methods whose numbers are not yet held (``until_held``)."""
    config = read_group("experiment")[twin]
    drawn, draws = swept_draws(config)
    if mode == "every_draw" or not draws:
        run_preset(twin, datasets, data_dir, results_dir)
        return
    waiting = list(swept_values(config, "method"))
    done = 0
    while waiting and done < len(draws):
        batch = draws[done : done + max(FIRST_BATCH, done)]
        overrides = [f"method={','.join(waiting)}", f"{drawn}={','.join(batch)}"]
        run_preset(twin, datasets, data_dir, results_dir, overrides)
        done += len(batch)
        waiting = not_yet_held(preset, waiting, results_dir, datasets)
    held = "every number it verifies is held" if not waiting else "draws ran out"
    say(f"{twin}: {done} of {len(draws)} draws run ({held}).")


def swept_draws(config: dict) -> tuple[str | None, list[str]]:
    """The override a twin sweeps its draws by (``method.params.seed`` or ``.fold``) and
    the draws, in the configured order; (None, []) for a twin without swept draws."""
    for name in DRAWN:
        key = f"method.params.{name}"
        values = swept_values(config, key)
        if values:
            return key, [str(v) for v in values]
    return None, []


def not_yet_held(preset: str, methods: list[str], results_dir, datasets=()) -> list[str]:
    """Of ``methods``, those that verify a published number of ``preset`` whose stored
    spread does not hold it yet (compared afresh from the store). A number on ``datasets``
    whose own cell is not stored yet (its preset's sweep runs in another lane) counts as
    not held unless the spread holds it: it may still differ."""
    from calbench.reproduce.comparison import compare, unheld_verifiers

    report = compare(preset, results_dir)
    unheld = report[report["status"].isin(("unexplained", "cause not verified"))]
    verifying = {text.split(":", 1)[0] for text in unheld["procedure"] if text}
    pending = (report["status"] == "not run") & report["dataset"].isin(list(datasets))
    if pending.any():
        verifying |= unheld_verifiers(preset, results_dir, set(np.flatnonzero(pending)))
    return [m for m in methods if m in verifying]


def witness_draws(preset: str, results_dir) -> dict[str, list[str]]:
    """Twin -> its draws with its witnesses first: the fewest draws that meet both bounds
    (`calbench.reproduce.comparison.verified_bounds`) of every number its stored spread
    holds (`cover_first`), then its other configured draws in their configured order. Used
    to write a pack's sweep order (`scripts/witness_draws.py`)."""
    from calbench.reproduce.comparison import verified_bounds

    bounds = verified_bounds(preset, results_dir)
    configs = read_group("experiment")
    out = {}
    for twin in procedure_presets(preset):
        _, draws = swept_draws(configs[twin])
        methods = set(swept_values(configs[twin], "method"))
        unmet = [side for method, _, *sides in bounds if method in methods for side in sides]
        out[twin] = cover_first(draws, unmet)
    return out


def cover_first(draws: list[str], unmet: list[set]) -> list[str]:
    """``draws`` reordered so that a fewest of them meeting every set in ``unmet`` (each met
    by any one of its draws) come first, the rest after in their given order. The fewest
    is searched exactly up to `EXACT_COVER` draws (the first such set in the given order),
    else a greedy cover (each next draw meets the most sets still unmet, ties to the
    earlier draw); either way the same order on every run."""
    unmet = [side for side in unmet if side & set(draws)]
    greedy, left = [], unmet
    while left:
        best = max(draws, key=lambda d: (sum(d in side for side in left), -draws.index(d)))
        greedy.append(best)
        left = [side for side in left if best not in side]
    first = greedy
    for size in range(1, min(len(greedy), EXACT_COVER + 1)):
        found = (c for c in combinations(draws, size) if all(side & set(c) for side in unmet))
        cover = next(found, None)
        if cover is not None:
            first = list(cover)
            break
    return first + [d for d in draws if d not in first]
