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
"""

from __future__ import annotations

from calbench.conf_files import read_group, swept_values
from calbench.reproduce.spreads import DRAWN, procedure_presets

#: How a reproduction runs the procedure twins.
MODES = ("until_held", "every_draw", "none")
#: Draws in the first batch: two give a spread; one gives a point.
FIRST_BATCH = 2


def run_procedures(preset, present, data_dir, results_dir, mode: str, run_preset) -> None:
    """The preset's procedure twins on the present data sets each sweeps, as ``mode`` says
    (`MODES`), each sweep run by ``run_preset(twin, datasets, data_dir, results_dir,
    overrides)`` (`calbench.reproduce.run.run_preset`)."""
    configs = read_group("experiment")
    for twin in procedure_presets(preset):
        datasets = [d for d in present if d in swept_values(configs[twin], "dataset")]
        if not datasets or mode == "none":
            continue
        drawn, draws = swept_draws(configs[twin])
        if mode == "every_draw" or not draws:
            run_preset(twin, datasets, data_dir, results_dir)
            continue
        waiting = list(swept_values(configs[twin], "method"))
        done = 0
        while waiting and done < len(draws):
            batch = draws[done : done + max(FIRST_BATCH, done)]
            overrides = [f"method={','.join(waiting)}", f"{drawn}={','.join(batch)}"]
            run_preset(twin, datasets, data_dir, results_dir, overrides)
            done += len(batch)
            waiting = not_yet_held(preset, waiting, results_dir)
        held = "every number it verifies is held" if not waiting else "draws ran out"
        print(f"{twin}: {done} of {len(draws)} draws run ({held}).", flush=True)


def swept_draws(config: dict) -> tuple[str | None, list[str]]:
    """The override a twin sweeps its draws by (``method.params.seed`` or ``.fold``) and
    the draws, in the configured order; (None, []) for a twin without swept draws."""
    for name in DRAWN:
        key = f"method.params.{name}"
        values = swept_values(config, key)
        if values:
            return key, [str(v) for v in values]
    return None, []


def not_yet_held(preset: str, methods: list[str], results_dir) -> list[str]:
    """Of ``methods``, those that verify a published number of ``preset`` whose stored
    spread does not hold it yet (compared afresh from the store)."""
    from calbench.reproduce.comparison import compare

    report = compare(preset, results_dir)
    unheld = report[report["status"].isin(("unexplained", "cause not verified"))]
    verifying = {text.split(":", 1)[0] for text in unheld["procedure"] if text}
    return [m for m in methods if m in verifying]
