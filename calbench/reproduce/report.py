"""Published numbers beside calbench's: one row per printed number, with a status and a cause.

A number is

- ``equal`` when calbench's value, scaled as the paper prints it, rounds to the printed
  digits (within half a unit of the last printed digit);
- ``within tolerance`` when it is off by no more than a tolerance that a rule in
  ``notes.yaml`` states together with its reason (the reference code's float32 arithmetic,
  a value on a rounding boundary, ...);
- ``differs`` otherwise, with the known cause where a rule gives one;
- ``not run`` when the store holds no such cell (the data set is absent, or the preset has
  not run yet).

Values are the mean over the folds of the newest cell of each data set and method (the
deep-net presets have one fold).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd

from calbench.conf_files import load_yaml
from calbench.reproduce.published import not_reproducible, published
from calbench.runner.store import ResultStore

STATUSES = ("equal", "within tolerance", "differs", "not run")
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
    "note",
]
_RULE_KEYS = ("paper", "table", "dataset", "method", "metric")


@dataclass(frozen=True)
class Rule:
    """What is known about some published numbers: matched on the keys it names."""

    match: dict
    note: str
    tolerance: float | None = None  # in the printed units (after ``scale``)

    def applies(self, row) -> bool:
        return all(str(row[k]) == str(v) for k, v in self.match.items())


def rules() -> list[Rule]:
    text = resources.files("calbench.reproduce").joinpath("notes.yaml").read_text()
    out = []
    for entry in load_yaml(text) or []:
        match = {k: entry[k] for k in _RULE_KEYS if k in entry}
        out.append(Rule(match, " ".join(str(entry["note"]).split()), entry.get("tolerance")))
    return out


def _calbench_values(rows: pd.DataFrame) -> pd.Series:
    """Mean over folds of the newest cell of each (dataset, classifier, method): cells run
    with other settings (another data path, seed, protocol) are never averaged together."""
    if rows.empty:
        return pd.Series(dtype=float)
    cell = ["dataset", "classifier", "method"]
    newest = rows.sort_values("written").groupby(cell)["config_hash"].last()
    rows = rows[rows["config_hash"].isin(newest)]
    return rows.groupby(["dataset", "method", "metric"])["value"].mean()


def _average_ranks(specs, rows: pd.DataFrame) -> dict:
    """(spec, row label, column label) -> value of calbench's own tables for the published
    numbers that are average ranks (Kull Tables 1-2: per classifier and over all tasks)."""
    from calbench.errors import CalbenchError
    from calbench.tables.cli import metric_direction, table_specs
    from calbench.tables.layouts import build_table

    found = {}
    for name in specs:
        try:
            table = build_table(table_specs()[name], rows, metric_direction())
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


def compare(preset: str, results_dir="results") -> pd.DataFrame:
    """The report's rows for every published number of ``preset``."""
    table = published(preset)
    stored = ResultStore(results_dir).read(preset)
    values = _calbench_values(stored)
    ranked = _average_ranks(sorted(set(table["spec"]) - {""}), stored)
    known = rules()
    out = []
    for _, row in table.iterrows():
        if row["spec"]:
            ours = ranked.get((row["spec"], _row_label(row["dataset"]), row["column"]), np.nan)
        else:
            key = (row["dataset"], row["method"], row["metric"])
            ours = values.get(key, np.nan) * float(row["scale"])
        printed = row["printed"]
        half_unit = 0.5 * 10.0 ** -row["decimals"]
        matching = [r for r in known if r.applies(row)]
        tolerance = next((r.tolerance for r in matching if r.tolerance is not None), None)
        delta = ours - printed
        if np.isnan(ours):
            status = "not run"
        elif abs(delta) <= half_unit * (1 + 1e-9):
            status = "equal"
        elif tolerance is not None and abs(delta) <= tolerance + half_unit:
            status = "within tolerance"
        else:
            status = "differs"
        note = " ".join(r.note for r in matching) if status != "equal" else ""
        if status == "differs" and not matching:
            note = "cause not yet known"
        out.append(
            [
                row["paper"],
                row["table"],
                row["dataset"],
                row["column"],
                row["method"],
                row["metric"],
                row["value"],
                "" if np.isnan(ours) else f"{ours:.{row['decimals'] + 1}f}",
                "" if np.isnan(ours) else f"{delta:+.{row['decimals'] + 1}f}",
                status,
                note,
            ]
        )
    return pd.DataFrame(out, columns=REPORT_COLUMNS)


def summary(report: pd.DataFrame) -> list[str]:
    """The closing lines: how many numbers were reproduced, which differ, what did not run."""
    counts = report["status"].value_counts()
    ran = report[report["status"] != "not run"]
    good = counts.get("equal", 0) + counts.get("within tolerance", 0)
    lines = [
        f"{good} of {len(ran)} published numbers reproduced "
        f"({counts.get('equal', 0)} equal at the printed rounding, "
        f"{counts.get('within tolerance', 0)} within a stated tolerance); "
        f"{counts.get('differs', 0)} differ."
    ]
    differ = ran[ran["status"] == "differs"]
    if len(differ):
        by_table = differ.groupby(["paper", "table"]).size()
        lines.append(
            "Differ: " + "; ".join(f"{p} {t}: {n}" for (p, t), n in by_table.items()) + "."
        )
    missing = report[report["status"] == "not run"]
    ranks = missing["dataset"].str.startswith("classifier:")
    if (~ranks).any():
        sets = sorted(missing.loc[~ranks, "dataset"].unique())
        lines.append(
            f"{int((~ranks).sum())} published numbers not run: no cells for {', '.join(sets)} "
            "(their data are absent here, or the preset has not run on them)."
        )
    if ranks.any():
        lines.append(
            f"{int(ranks.sum())} published average ranks not computed: the preset's rank "
            "tables have no task with every method run yet."
        )
    return lines


def render_markdown(preset: str, report: pd.DataFrame, lines: list[str]) -> str:
    from tabulate import tabulate

    papers = sorted(report["paper"].unique())
    skipped = not_reproducible()
    skipped = skipped[skipped["paper"].isin(papers)]
    out = [
        f"# Reproduction of `{preset}`: published vs calbench",
        "",
        *lines,
        "",
        "Status: *equal* = rounds to the printed digits; *within tolerance* = off by no more "
        "than the tolerance the note justifies; *differs* = neither (the note gives the known "
        "cause); *not run* = no stored cell.",
        "",
    ]
    shown = report[report["status"] != "not run"].copy()
    # Long causes as numbered notes under the table, so the table stays readable.
    causes = [n for n in dict.fromkeys(shown["note"]) if n]
    shown["note"] = shown["note"].map(lambda n: f"[{causes.index(n) + 1}]" if n else "")
    if len(shown):
        table = tabulate(
            shown, headers="keys", tablefmt="github", showindex=False, disable_numparse=True
        )
        out += [table, ""]
        out += [f"[{i}] {cause}" + "  " for i, cause in enumerate(causes, start=1)]
        out.append("")
    if len(skipped):
        out += ["## Tables that could not be run", ""]
        out += [f"- {r.paper} {r.table}: {r.reason}" for r in skipped.itertuples()]
        out.append("")
    return "\n".join(out)
