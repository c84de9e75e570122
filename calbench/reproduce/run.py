"""``calbench reproduce PRESET``: run a paper preset on the data present, then set every
published number of its tables beside calbench's.

``--from DIR`` first installs the registered files found in DIR (``calbench data fetch all
--from DIR``: checksums verified). The preset then runs on the data sets of its sweep that
are present (cells already stored are reused): minutes. The
``PRESET_procedure`` twins (the papers' own fitting procedures over seeds, whose spreads
verify the stated causes) run beside it, each only until the spread of the seeds run
holds every printed number it verifies, its witness seeds first
(`calbench.reproduce.procedures`; ``--procedures every_draw`` runs all their seeds,
``--fast`` none); the sweep and the twins, of every preset for ``all``, run two at a time
(``--lanes``, `calbench.reproduce.lanes`). Their stored cells are always read, and a row
whose stated cause is not yet verified says what verifying it costs. Then
``results/reproduction/PRESET.csv`` and ``.md`` get one row per published number (see
`calbench.reproduce.comparison`). ``calbench reproduce all`` does so for every preset with
published numbers whose data are present, and writes ``results/reproduction/index.md``: one
overview line per paper table.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.packs import paper_packs
from calbench.reproduce.comparison import compare
from calbench.reproduce.lanes import Stage, in_lanes, lane, say
from calbench.reproduce.procedures import procedure_stages
from calbench.reproduce.published import presets, published
from calbench.reproduce.rendering import interval_summary, render_markdown, summary
from calbench.reproduce.spreads import procedure_minutes


def presets_of_all() -> list[str]:
    """What ``calbench reproduce all`` runs: each paper pack's ``reproduce_all`` presets
    (minutes each; a pack leaves out what takes longer, as kull_uci's 40 minutes)."""
    return [p for pack in paper_packs().values() for p in pack.meta.get("reproduce_all") or []]


def _report_extra(preset: str, report, results_dir) -> str:
    """What the paper pack of the preset's published numbers adds to its report (its
    ``report_extra``), if anything."""
    pack = paper_packs()[published(preset)["pack"].iloc[0]]
    extra = getattr(pack.python(), "report_extra", None)
    return extra(preset, report, results_dir) if extra else ""


def preset_datasets(preset: str) -> list[str]:
    """The data sets a preset sweeps (its ``hydra.sweeper.params.dataset``)."""
    from calbench.data.registry import experiments_using

    return sorted(name for name, used in experiments_using().items() if preset in used)


def run_preset(preset: str, datasets: list[str], data_dir, results_dir, overrides=()) -> None:
    """``calbench run -m experiment=PRESET dataset=... [overrides]`` in a child process, so
    Hydra starts clean and a failing cell reports as it does from the command line."""
    command = [
        sys.executable,
        "-m",
        "calbench.cli",
        "run",
        "-m",
        f"experiment={preset}",
        f"dataset={','.join(datasets)}",
        f"data_dir={data_dir}",
        f"results_dir={results_dir}",
        *overrides,
    ]
    if lane() is not None:  # stages started in the same second must not share Hydra's folder
        when = datetime.now().strftime("%Y-%m-%d/%H-%M-%S")
        command.append(f"hydra.sweep.dir={results_dir}/hydra/multirun/{when}-{lane()}")
    say("running: calbench " + " ".join(command[3:]))
    if run_child(command) != 0:
        raise CalbenchError(f"The {preset} sweep failed (see above); nothing was compared.")


def run_child(command: list[str]) -> int:
    """Run ``command``; its exit status. In a lane its output (stderr too) is passed on
    line by line, each led by the lane's name (`say`)."""
    if lane() is None:
        return subprocess.run(command).returncode
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as child:
        for line in child.stdout:
            say(line.rstrip("\n"))
    return child.returncode


def reproduce(
    preset,
    data_dir="data",
    results_dir="results",
    source_dir=None,
    run=True,
    procedures="until_held",
    intervals=None,
    lanes=1,
):
    """Run (unless ``run`` is false) and compare; returns (report path, summary lines), or
    None where none of the preset's data sets is present and ``run`` is "if-present".
    With ``intervals`` (`BootstrapSettings`), each number gets calbench's interval; with
    ``lanes`` above 1, the preset's sweep and its twins run that many at a time."""
    start = time.perf_counter()
    done = reproduce_many([preset], data_dir, results_dir, source_dir, run, procedures, lanes)
    if preset not in done:
        return None
    timing = []
    if run:
        timing.append(
            f"Run time: {time.perf_counter() - start:.0f} s on {', '.join(done[preset])} "
            "(cells already stored are not rerun)."
        )
    return report(preset, results_dir, intervals, timing)


def reproduce_many(
    names, data_dir, results_dir, source_dir=None, run=True, procedures="until_held", lanes=1
) -> dict:
    """Run the presets' stages (each's sweep and each of its procedure twins,
    `procedure_stages`) on their present data sets, ``lanes`` at a time (`in_lanes`; one
    lane: each preset's sweep, then its twins, as before); preset -> the data sets
    it ran on (those present when ``run`` is false), leaving out one without any where
    ``run`` is "if-present"."""
    for preset in names:
        if preset not in presets():
            raise CalbenchError(
                f"No published numbers are recorded for preset {preset!r}; "
                f"known: {', '.join(presets())}."
            )
    if source_dir is not None:
        install_from(source_dir, data_dir)
    present = {}
    for preset in names:
        sets = _present_sets(preset, data_dir, run)
        if sets is not None:
            present[preset] = sets
    if run:
        stages = []
        for preset, sets in present.items():
            sweep = functools.partial(run_preset, preset, sets, data_dir, results_dir)
            minutes = procedure_minutes(preset, "preset_minutes") or 1.0
            stages.append(Stage(preset, minutes, sweep, first=True))
            stages += procedure_stages(preset, sets, data_dir, results_dir, procedures, run_preset)
        in_lanes(stages, lanes)
    return present


def _present_sets(preset, data_dir, run) -> list[str] | None:
    """The preset's data sets present in ``data_dir`` (saying which are absent); None where
    none is and ``run`` is "if-present"; an error where none is and it is to run."""
    from calbench.data.install import usable_sets

    numbers = published(preset)
    cells = numbers[numbers["spec"] == ""]  # average-rank rows come from the preset's tables
    wanted = sorted(set(cells["dataset"]) | set(preset_datasets(preset)))
    present = usable_sets(wanted, data_dir)
    absent = [name for name in wanted if name not in present]
    if absent and run:
        say(f"{preset}: not present, skipped: {', '.join(absent)}")
    if run == "if-present" and not present:
        say(f"{preset}: none of its data sets is present in {data_dir}; skipped.")
        return None
    if run and not present:
        raise CalbenchError(
            f"None of {preset}'s data sets is present in {data_dir}; fetch them "
            "(calbench data fetch NAME, or --from DIR) and run again."
        )
    return present


def report(preset, results_dir, intervals=None, more=()) -> tuple[Path, list[str]]:
    """Compare the stored cells with the published numbers and write the report:
    (its .md's path, the summary lines, ``more`` last)."""
    table = compare(preset, results_dir, intervals)
    lines = summary(table)
    if intervals is not None:
        lines.append(interval_summary(table, intervals))
    lines += list(more)
    return _write_report(preset, table, lines, results_dir), lines


def install_from(source_dir, data_dir) -> None:
    """``calbench data fetch all --from source_dir`` into ``data_dir`` (checksums verified)."""
    from calbench.data.install import fetch

    fetch(["all"], data_dir, progress=False, source_dir=source_dir)


def _write_report(preset: str, report, lines: list[str], results_dir) -> Path:
    """``reproduction/PRESET.csv`` and ``.md`` (with the pack's extra section); the .md's path."""
    out = Path(results_dir) / "reproduction"
    atomic_write_text(out / f"{preset}.csv", report.to_csv(index=False))
    markdown = render_markdown(preset, report, lines)
    extra = _report_extra(preset, report, results_dir)
    if extra:
        markdown += "\n" + extra + "\n"
    atomic_write_text(out / f"{preset}.md", markdown)
    return out / f"{preset}.md"
