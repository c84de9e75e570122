"""Published numbers beside calbench's: one row per printed number, with a status and a cause.

A number is

- ``equal`` when calbench's value, scaled as the paper prints it, rounds to the printed
  digits (within half a unit of the last printed digit);
- ``within tolerance`` when it is off by no more than a tolerance that a rule in a paper
  pack's ``notes.yaml`` (`rules`) states together with its reason (the reference code's
  float32 arithmetic, a value on a rounding boundary, ...);
- ``verified cause`` when it differs, and a rule names a calbench method that follows the
  paper's own procedure (``verify:``), and the printed number lies inside the spread of that
  method's stored cells (one per seed, fold or arithmetic; widened by half a printed unit,
  since the paper rounds, and by the tolerance a rule states for the number, which is what
  the metric's own arithmetic moves identical predictions by) -- the cause is then a fact,
  run in calbench;
- ``unexplained`` when it differs otherwise: no rule, a rule whose cause has not been run,
  or a procedure whose spread misses the printed number (the row says which);
- ``not run`` when the store holds no such cell (the data set is absent, or the preset has
  not run yet).

Values are the mean over the folds of the newest cell of each data set and method (the
deep-net presets have one fold).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.reproduce.published import published
from calbench.reproduce.rules import rules
from calbench.reproduce.spreads import procedure_spreads, verify_hint
from calbench.results.experiment import Results
from calbench.stats.bootstrap import stored_bootstrap

STATUSES = (
    "equal",
    "within tolerance",
    "verified cause",
    "cause not verified",
    "unexplained",
    "not run",
)
#: "cause not verified": a cause is stated and the procedure that would verify it is
#: shipped, but its twin has not run here (`calbench reproduce PRESET --fast`, or --no-run).
DIFFERS = ("verified cause", "cause not verified", "unexplained")
REPORT_COLUMNS = [
    "paper",
    "table",
    "dataset",
    "column",
    "method",
    "metric",
    "published",
    "calbench",
    "delta",
    "status",
    "procedure",
    "note",
    "cells",
]


def _calbench_values(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean over folds (``value``) of the newest cell (``config_hash``) of each (dataset,
    classifier, method), indexed by (dataset, method, metric): cells run with other settings
    (another data path, seed, protocol) are never averaged together."""
    if rows.empty:
        return pd.DataFrame(columns=["value", "config_hash"])
    cell = ["dataset", "classifier", "method"]
    newest = rows.sort_values("written").groupby(cell)["config_hash"].last()
    rows = rows[rows["config_hash"].isin(newest)]
    grouped = rows.groupby(["dataset", "method", "metric"])
    return pd.DataFrame(
        {"value": grouped["value"].mean(), "config_hash": grouped["config_hash"].first()}
    )


#: What a procedure method's cells differ in: its seed, or (Rahimi et al.'s IOP, whose seed
#: is fixed) which of the authors' cross-validation models predicts.
def _average_ranks(specs, rows: pd.DataFrame) -> dict:
    """(spec, row label, column label) -> value of calbench's own tables for the published
    numbers that are average ranks (Kull Tables 1-2: per classifier and over all tasks)."""
    from calbench.errors import CalbenchError
    from calbench.metrics import higher_is_better
    from calbench.tables.catalogue import build_table
    from calbench.tables.write import table_specs

    found = {}
    for name in specs:
        try:
            table = build_table(table_specs()[name], rows, higher_is_better)
        except CalbenchError:  # no task complete yet: those numbers are "not run"
            continue
        for (_, label), line in zip(table.row_labels, table.values, strict=True):
            for column, value in zip(table.columns, line, strict=True):
                found[(name, label, column)] = value
    return found


def _row_label(dataset: str) -> str:
    """``classifier:adas`` -> ``adas``; ``classifier:all`` -> the tables' ``avg rank``."""
    label = dataset.split(":", 1)[1]
    return "avg rank" if label == "all" else label


def _status(ours, printed, half_unit, tolerance, spread, scale, pending=False) -> str:
    """``pending``: a procedure that would verify the stated cause is shipped but has not
    run here."""
    if np.isnan(ours):
        return "not run"
    if abs(ours - printed) <= half_unit * (1 + 1e-9):
        return "equal"
    if tolerance is not None and abs(ours - printed) <= tolerance + half_unit:
        return "within tolerance"
    if spread is not None and spread.holds(printed, scale, half_unit + (tolerance or 0.0)):
        return "verified cause"
    return "cause not verified" if pending and spread is None else "unexplained"


def compare(preset: str, results_dir="results", intervals=None) -> pd.DataFrame:
    """The report's rows for every published number of ``preset``; with ``intervals``
    (`calbench.stats.bootstrap.BootstrapSettings`) also calbench's bootstrap interval of
    each number and whether the printed number lies in it (columns `INTERVAL_COLUMNS`)."""
    table = published(preset)
    store = Results.of(results_dir)
    stored = store.rows(preset)
    values = _calbench_values(stored)
    ranked = _average_ranks(sorted(set(table["spec"]) - {""}), stored)
    known = rules()
    procedures = {r.verify for r in known if r.verify}
    spreads = procedure_spreads(results_dir, preset, procedures) if procedures else {}
    out, bounds = [], []
    for _, row in table.iterrows():
        ours, cells = _ours(row, values, ranked)
        printed, decimals, scale = row["printed"], row["decimals"], float(row["scale"])
        matching, tolerance, verify = _rules_of(row, known)
        spread = spreads.get((row["dataset"], verify, row["metric"])) if verify else None
        half_unit = 0.5 * 10.0**-decimals
        hint = verify_hint(preset, verify) if verify else ""
        status = _status(ours, printed, half_unit, tolerance, spread, scale, bool(hint))
        procedure = ""
        if verify and status != "not run":
            procedure = f"{verify}: " + (
                spread.describe(scale, decimals + 1) if spread else "not run"
            )
            if spread and not spread.deterministic:
                slack = half_unit + (tolerance or 0.0)
                procedure += "; " + spread.describe_place(printed, scale, slack)
            if spread:
                cells = " ".join([cells, *spread.cells]).strip()
        note = _note(status, matching, spread, hint)
        delta = ours - printed
        out.append(
            [
                row["paper"],
                row["table"],
                row["dataset"],
                row["column"],
                row["method"],
                row["metric"],
                row["value"],
                "" if np.isnan(ours) else f"{ours:.{decimals + 1}f}",
                "" if np.isnan(ours) else f"{delta:+.{decimals + 1}f}",
                status,
                procedure,
                note,
                cells,
            ]
        )
        if intervals is not None:
            bounds.append(_interval(store, stored, cells.split(" ")[0], row, intervals))
    report = pd.DataFrame(out, columns=REPORT_COLUMNS)
    if intervals is not None:
        report[INTERVAL_COLUMNS] = pd.DataFrame(bounds, columns=INTERVAL_COLUMNS)
    return report


def _rules_of(row, known) -> tuple[list, float | None, str | None]:
    """The rules that apply to a published ``row``, the tolerance they state and the
    procedure method that verifies their cause (None where none does)."""
    matching = [r for r in known if r.applies(row)]
    tolerance = next((r.tolerance for r in matching if r.tolerance is not None), None)
    verify = next((r.verify for r in matching if r.verify), None)
    return matching, tolerance, verify


def _verifications(preset: str, results_dir):
    """(position, row, verifying method, its stored spread or None, the spread's slack: half
    a printed unit plus the number's tolerance) of each published number of ``preset``
    that a rule says a procedure verifies."""
    known = rules()
    procedures = {r.verify for r in known if r.verify}
    spreads = procedure_spreads(results_dir, preset, procedures) if procedures else {}
    for position, (_, row) in enumerate(published(preset).iterrows()):
        _, tolerance, verify = _rules_of(row, known)
        if verify:
            spread = spreads.get((row["dataset"], verify, row["metric"]))
            yield position, row, verify, spread, 0.5 * 10.0 ** -row["decimals"] + (tolerance or 0)


def verified_bounds(preset: str, results_dir="results") -> list[tuple[str, str, set, set]]:
    """For each published number of ``preset`` that a procedure's stored spread holds: its
    (verifying method, dataset, draws not below it, draws not above it), each draw as
    text. A subset of the draws holds the number iff it meets both sets (`Spread.holds`):
    what `calbench.reproduce.procedures.witness_draws` orders the draws by."""
    out = []
    for _, row, verify, spread, slack in _verifications(preset, results_dir):
        if spread is None or spread.deterministic:
            continue
        slack *= 1 + 1e-9
        values = np.asarray(spread.values) * float(row["scale"])
        draws = [str(d) for d in spread.draws]
        not_below = {d for d, v in zip(draws, values, strict=True) if v >= row["printed"] - slack}
        not_above = {d for d, v in zip(draws, values, strict=True) if v <= row["printed"] + slack}
        if not_below and not_above:
            out.append((verify, row["dataset"], not_below, not_above))
    return out


def unheld_verifiers(preset: str, results_dir, positions) -> set[str]:
    """The verifying methods of the published numbers at ``positions`` (of `published`'s
    rows) whose stored spread does not hold them, or that have none yet."""
    return {
        verify
        for position, row, verify, spread, slack in _verifications(preset, results_dir)
        if position in positions
        and not (spread and spread.holds(row["printed"], float(row["scale"]), slack))
    }


def _ours(row, values: pd.DataFrame, ranked: dict) -> tuple[float, str]:
    """calbench's number for a published ``row``, at the paper's scale, and the cells it
    comes from ("" for an average rank, computed over many); NaN where none is stored."""
    if row["spec"]:
        return ranked.get((row["spec"], _row_label(row["dataset"]), row["column"]), np.nan), ""
    key = (row["dataset"], row["method"], row["metric"])
    if key not in values.index:
        return np.nan, ""
    return values.at[key, "value"] * float(row["scale"]), values.at[key, "config_hash"]


def _note(status: str, matching: list, spread, hint: str) -> str:
    """Why a number differs: the matching rules' notes, led by what is known of the cause."""
    note = " ".join(r.note for r in matching) if status != "equal" else ""
    if status == "cause not verified":
        return hint + note
    if status != "unexplained":
        return note
    if not matching:
        return "cause not yet known"
    if spread is not None:
        return "the paper's procedure, run in calbench, misses the printed value. " + note
    return "stated cause not yet verified by running it in calbench. " + note


#: The columns a report with intervals adds: calbench's interval at the printed scale, and
#: whether the printed number lies in it (its printed rounding allowed for).
INTERVAL_COLUMNS = ["interval", "inside"]


def _interval(store, stored, cell_hash, row, settings) -> list[str]:
    """[interval, inside] of one published number ("" where it has no single cell)."""
    if not cell_hash or row["spec"]:
        return ["", ""]
    sha256 = stored.loc[stored["config_hash"] == cell_hash, "predictions_sha256"].iat[0]
    boot = stored_bootstrap(store, cell_hash, sha256, [row["metric"]], settings)
    scale, decimals = float(row["scale"]), row["decimals"]
    low, high = (scale * v for v in boot.interval(row["metric"], settings.alpha, settings.method))
    half = 0.5 * 10.0**-decimals
    inside = low - half <= row["printed"] <= high + half
    return [f"[{low:.{decimals + 1}f}, {high:.{decimals + 1}f}]", "yes" if inside else "no"]
