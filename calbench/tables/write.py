"""``calbench tables``: the paper tables (specs under ``conf/table``) of every experiment with
results, and a generic ranked table per metric for an experiment without a paper layout,
under results/tables as Markdown, LaTeX and CSV. Ho's risk curves are written as a CSV of
the curves, a condensed table and their figure.

--ci adds each value's bootstrap interval from the stored test predictions (nothing is
refitted) and marks with † the methods not distinguishable from their row's best."""

# The curves' figure is the plots' (`calbench.plots.write.risk_curve_files`), handed in as
# ``draw_curve`` by those above both rooms (the command line, the experiment report), so
# tables import no plots.

from __future__ import annotations

from pathlib import Path

from calbench.atomic import atomic_write_text
from calbench.conf_files import group_files, read_group
from calbench.errors import CalbenchError
from calbench.metrics import higher_is_better
from calbench.results.experiment import Results
from calbench.results.predictions import DamagedPredictions
from calbench.results.store import DamagedCells
from calbench.stats.bootstrap import BootstrapSettings
from calbench.tables.catalogue import build_table, layout_of
from calbench.tables.certainties import mark_unconverged, mark_wrong_certainties
from calbench.tables.curves import curve_frame
from calbench.tables.generic import generic_specs
from calbench.tables.intervals import add_intervals
from calbench.tables.render import RENDERERS


def table_specs() -> dict[str, dict]:
    """All shipped table specs by name, one per experiment it applies to.

    A spec names one ``experiment`` (its name is the file stem), or several as
    ``experiments: {name: entry}``: a paper's table for its real-data preset and the
    offline stand-in, or Kull's tables for kull_uci, kull_uci_full and kull_uci_offline.
    Each experiment gets the file stem with its first experiment's name replaced. Its
    entry is null (the spec as it is), a note appended to the title, or a mapping of the
    keys that differ for it (its own ``title``, ``columns``, ``rows``, ...).
    """
    specs = {}
    for stem, spec in read_group("table").items():
        experiments = spec.pop("experiments", None) or {spec["experiment"]: None}
        first = next(iter(experiments))
        if not stem.startswith(first):
            raise CalbenchError(f"table spec {stem}.yaml must be named after {first!r}.")
        for experiment, entry in experiments.items():
            one = dict(spec, experiment=experiment, name=experiment + stem[len(first) :])
            if isinstance(entry, dict):
                one.update(entry)
            elif entry:
                one["title"] = f"{spec['title'].rstrip('.')}, {entry}."
            specs[one["name"]] = one
    return specs


def write_tables(
    results_dir,
    experiment=None,
    formats=("md", "tex", "csv"),
    echo=True,
    draw_curve=None,
    intervals: BootstrapSettings | None = None,
) -> list[Path]:
    """Every table of the experiments in the store (or of ``experiment`` alone): the paper
    layouts where an experiment has them, else the generic ranked layout
    (`calbench.tables.generic`). Says what it built and what it skipped, with why. With
    ``intervals``, each value gets its bootstrap interval and a mark where it cannot be
    told from the row's best (`calbench.tables.intervals`)."""
    results = Results.of(results_dir)
    wanted, rows = _wanted_experiments(results, experiment, echo)
    todo = _table_specs(wanted, rows, intervals)
    out_dir = Path(results_dir) / "tables"
    written, built, skipped, damaged = [], [], [], []
    for spec, part in todo:
        for column, value in (spec.get("where") or {}).items():  # e.g. one prior shift
            part = part[part[column] == value]
        try:
            if spec["layout"] == "risk_curve":
                for one, piece in _per_network(spec, part):
                    written += _write_curves(one, piece, Path(results_dir), formats, echo)
                    if draw_curve is not None:  # the figure is the plots' (see the docstring)
                        written += draw_curve(one, curve_frame(one, piece), Path(results_dir))
                    built.append(one["name"])
                continue
            table = _built_table(spec, part, results.store, intervals)
        except (DamagedCells, DamagedPredictions) as exc:
            damaged.append(f"{spec['name']}: {' '.join(str(exc).split())}")
            continue
        except CalbenchError as exc:
            skipped.append(f"{spec['name']}: {exc}")
            continue
        for fmt in formats:
            path = out_dir / f"{spec['name']}.{fmt}"
            atomic_write_text(path, RENDERERS[fmt](table))
            written.append(path)
        built.append(spec["name"])
    _say_what_was_built(wanted, built, skipped, damaged, len(todo), echo)
    return written


def _wanted_experiments(results: Results, experiment, echo: bool):
    """The experiments to tabulate (all stored, or ``experiment``) and the store's rows;
    one line on cells a newer config superseded, one error where nothing is stored."""
    store, rows = results.store, results.rows()
    old = results.superseded()
    if old and echo:
        print(
            f"note: {len(old)} stored cell(s) are superseded by newer ones (a config, the "
            f"files read or your calibrator's code changed since) and are left out of the "
            f"tables: {', '.join(sorted(old)[:5])}{' ...' if len(old) > 5 else ''} in "
            f"{store.root}; the sweep that made them, run again, computes them as they are now."
        )
    present = sorted(set(rows["experiment"])) if not rows.empty else []
    wanted = [e for e in ([experiment] if experiment else present) if e in present]
    if not wanted:
        known = ", ".join(present) or "none"
        name = experiment or "valk_synthetic"
        hint = (
            f"run `calbench run experiment={name}` first"
            if name in group_files("experiment")
            else f"{name} is no preset; runs without experiment=... are stored as `default`"
        )
        raise CalbenchError(
            f"No results in {store.root} for {experiment or 'any experiment'} (experiments "
            f"stored: {known}); {hint}."
        )
    return wanted, rows


def _table_specs(wanted: list[str], rows, intervals) -> list[tuple[dict, object]]:
    """(table spec, its experiment's rows): the paper layouts, else the generic ones."""
    paper = table_specs().values()
    todo = []
    for name in wanted:
        part = rows[rows["experiment"] == name]
        specs = [s for s in paper if s["experiment"] == name]
        todo += [(s, part) for s in specs or generic_specs(name, part)]
        if specs and intervals is not None and not any(layout_of(s).per_cell for s in specs):
            # Its paper tables rank tasks (Kull's UCI study): the intervals belong to each
            # task's values, which the generic tables lay out.
            todo += [(s, part) for s in generic_specs(name, part)]
    return todo


def _built_table(spec: dict, part, store, intervals):
    """One ranked table, its marks, and its intervals where asked for."""
    table = build_table(spec, part, higher_is_better)
    table = mark_unconverged(mark_wrong_certainties(table, part), part)
    if intervals is not None:
        checksums = part.groupby("config_hash")["predictions_sha256"].first().to_dict()
        table = add_intervals(table, store, checksums, intervals)
    return table


def _say_what_was_built(wanted, built, skipped, damaged, n_specs: int, echo: bool) -> None:
    if echo:
        print(f"built {len(built)} table(s) for {', '.join(wanted)}: {', '.join(built) or '-'}")
        for reason in skipped:
            print(f"skipped {reason}")
    if damaged:  # the tables that could be built are written; these are not
        raise CalbenchError(
            f"{len(damaged)} of {n_specs} table(s) not built: stored files they read are "
            f"damaged ({damaged[0]}). `calbench store verify --repair` moves them aside; "
            "rerun their sweeps, then the tables."
        )
    if not built:
        raise CalbenchError("No table could be built: " + "; ".join(skipped))


def _per_network(spec: dict, rows) -> list[tuple[dict, object]]:
    """A risk-curve spec once per data set (network) its rows hold, so that two networks'
    curves are never averaged: each title names its network, and where there are several,
    each gets files of its own (``NAME_DATASET``)."""
    names = sorted(set(rows["dataset"])) if not rows.empty else []
    if len(names) < 2:
        on = f" Network: {names[0]}." if names else ""
        return [(dict(spec, title=spec["title"].rstrip() + on), rows)]
    return [
        (
            dict(spec, name=f"{spec['name']}_{name}", title=f"{spec['title']} Network: {name}."),
            rows[rows["dataset"] == name],
        )
        for name in names
    ]


def _write_curves(spec, rows, results_dir: Path, formats, echo) -> list[Path]:
    """A ``risk_curve`` spec: the full curves as CSV, the condensed table in the other
    formats."""
    frame = curve_frame(spec, rows)
    table = build_table(spec, rows, higher_is_better)
    written = []
    for fmt in formats:
        path = results_dir / "tables" / f"{spec['name']}.{fmt}"
        text = frame.to_csv(index=False) if fmt == "csv" else RENDERERS[fmt](table)
        atomic_write_text(path, text)
        written.append(path)
    if echo:
        print(RENDERERS["md"](table))
    return written
