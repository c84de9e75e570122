"""A comparison report in words: the counts per status (`summary`) and the Markdown page
(`render_markdown`)."""

from __future__ import annotations

import pandas as pd

from calbench.markup import markdown_table
from calbench.reproduce.comparison import DIFFERS, STATUSES
from calbench.reproduce.published import not_reproducible


def interval_summary(report: pd.DataFrame, settings) -> str:
    """How many of the numbers that ran lie inside calbench's interval."""
    ran = report[report["inside"] != ""]
    held = int((ran["inside"] == "yes").sum())
    differ = ran[ran["status"].isin(DIFFERS)]
    return (
        f"{held} of {len(ran)} published numbers lie inside calbench's {settings.describe()} "
        f"(widened by half a printed unit); of the {len(differ)} that differ, "
        f"{int((differ['inside'] == 'yes').sum())} lie inside it."
    )


def counts(report: pd.DataFrame) -> dict:
    """Published numbers by status (every status present, zero where none)."""
    found = report["status"].value_counts()
    return {status: int(found.get(status, 0)) for status in STATUSES}


def summary(report: pd.DataFrame) -> list[str]:
    """The closing lines: how many numbers were reproduced, which differ and whether their
    cause is verified, what did not run."""
    n = counts(report)
    ran = report[report["status"] != "not run"]
    good = n["equal"] + n["within tolerance"]
    differ = sum(n[status] for status in DIFFERS)
    pending = n["cause not verified"]
    lines = [
        f"{good} of {len(ran)} published numbers reproduced ({n['equal']} equal at the "
        f"printed rounding, {n['within tolerance']} within a stated tolerance); {differ} "
        f"differ: {n['verified cause']} with a cause verified by running the paper's "
        "procedure, "
        + (f"{pending} with a stated cause whose procedure was not run here, " if pending else "")
        + f"{n['unexplained']} unexplained."
    ]
    for status in DIFFERS:
        part = ran[ran["status"] == status]
        if len(part):
            by_table = part.groupby(["paper", "table"]).size()
            lines.append(
                f"{status.capitalize()}: "
                + "; ".join(f"{p} {t}: {k}" for (p, t), k in by_table.items())
                + "."
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
    papers = sorted(report["paper"].unique())
    skipped = not_reproducible()
    skipped = skipped[skipped["paper"].isin(papers)]
    out = [
        f"# Reproduction of `{preset}`: published vs calbench",
        "",
        *lines,
        "",
        "Status: *equal* = rounds to the printed digits; *within tolerance* = off by no more "
        "than the tolerance the note justifies; *verified cause* = differs, and the paper's "
        "own procedure, run in calbench (column *procedure*: its spread over seeds or folds, "
        "and how many draws lie below the printed value, round to it and lie above it), "
        "holds the printed value; *cause not verified* = differs, the note states a cause, and "
        "the procedure that would verify it has not run here (`calbench reproduce` without "
        "`--fast` runs it); *unexplained* = differs otherwise (the note says what is known "
        "and what is not verified); *not run* = no stored cell. *cells*: the config hashes "
        "of the stored cells the numbers came from (`store/HASH.csv|yaml`).",
        "",
    ]
    if "inside" in report:
        out[-1:-1] = [
            "*interval*: calbench's bootstrap interval of the number, from the cell's stored "
            "test predictions (the summary says which); *inside*: the printed number lies in "
            "it, widened by half a printed unit.",
        ]
    shown = report[report["status"] != "not run"].copy()
    # Long causes as numbered notes under the table, so the table stays readable.
    causes = [n for n in dict.fromkeys(shown["note"]) if n]
    shown["note"] = shown["note"].map(lambda n: f"[{causes.index(n) + 1}]" if n else "")
    if len(shown):
        table = markdown_table(shown, index=False, tablefmt="github", disable_numparse=True)
        out += [table, ""]
        out += [f"[{i}] {cause}" + "  " for i, cause in enumerate(causes, start=1)]
        out.append("")
    if len(skipped):
        out += ["## Tables that could not be run", ""]
        out += [f"- {r.paper} {r.table}: {r.reason}" for r in skipped.itertuples()]
        out.append("")
    return "\n".join(out)
