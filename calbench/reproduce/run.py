"""``calbench reproduce PRESET``: run a paper preset on the data present, then set every
published number of its tables beside calbench's.

``--from DIR`` first installs the registered files found in DIR (``calbench data fetch all
--from DIR``: checksums verified). The preset then runs on the data sets of its sweep that
are present (cells already stored are reused): minutes. The
``PRESET_procedure`` twins (the papers' own fitting procedures over seeds, whose spreads
verify the stated causes) run next, each only until the spread of the seeds run holds
every printed number it verifies (`calbench.reproduce.procedures`; ``--procedures
every_draw`` runs all their seeds, ``--fast`` none; from empty, ``all`` took 56 minutes on
2 shared cores, most of it Valk's TS+DEC twin); their stored cells are always read,
and a row whose stated cause is not yet verified says what verifying it costs. Then
``results/reproduction/PRESET.csv`` and ``.md`` get one row per published number (see
`calbench.reproduce.comparison`). ``calbench reproduce all`` does so for every preset with
published numbers whose data are present, and writes ``results/reproduction/index.md``: one
overview line per paper table.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.packs import paper_packs
from calbench.reproduce.comparison import compare
from calbench.reproduce.procedures import run_procedures
from calbench.reproduce.published import presets, published
from calbench.reproduce.rendering import interval_summary, render_markdown, summary


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
    print("running: calbench " + " ".join(command[3:]), flush=True)
    if subprocess.run(command).returncode != 0:
        raise CalbenchError(f"The {preset} sweep failed (see above); nothing was compared.")


def reproduce(
    preset,
    data_dir="data",
    results_dir="results",
    source_dir=None,
    run=True,
    procedures="until_held",
    intervals=None,
):
    """Run (unless ``run`` is false) and compare; returns (report path, summary lines), or
    None where none of the preset's data sets is present and ``run`` is "if-present".
    With ``intervals`` (`BootstrapSettings`), each number gets calbench's interval."""
    from calbench.data.install import fetch, usable_sets

    if preset not in presets():
        raise CalbenchError(
            f"No published numbers are recorded for preset {preset!r}; "
            f"known: {', '.join(presets())}."
        )
    if source_dir is not None:
        fetch(["all"], data_dir, progress=False, source_dir=source_dir)
    numbers = published(preset)
    cells = numbers[numbers["spec"] == ""]  # average-rank rows come from the preset's tables
    wanted = sorted(set(cells["dataset"]) | set(preset_datasets(preset)))
    present = usable_sets(wanted, data_dir)
    absent = [name for name in wanted if name not in present]
    if absent and run:
        print(f"not present, skipped: {', '.join(absent)}")
    if run == "if-present" and not present:
        print(f"{preset}: none of its data sets is present in {data_dir}; skipped.")
        return None
    start = time.perf_counter()
    if run:
        if not present:
            raise CalbenchError(
                f"None of {preset}'s data sets is present in {data_dir}; fetch them "
                "(calbench data fetch NAME, or --from DIR) and run again."
            )
        run_preset(preset, present, data_dir, results_dir)
        run_procedures(preset, present, data_dir, results_dir, procedures, run_preset)
    report = compare(preset, results_dir, intervals)
    lines = summary(report)
    if intervals is not None:
        lines.append(interval_summary(report, intervals))
    if run:
        lines.append(
            f"Run time: {time.perf_counter() - start:.0f} s on {', '.join(present)} "
            "(cells already stored are not rerun)."
        )
    return _write_report(preset, report, lines, results_dir), lines


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
