"""``results/reproduction/index.md``: the product page of fidelity.

One line per paper table and preset, from the preset reports that exist (``calbench
reproduce PRESET`` writes them): how many numbers were published, how many are equal,
within a stated tolerance, differ with a cause verified by running the paper's procedure,
differ unexplained, or were not run and why; a link to each preset's report; the tables
that cannot be rerun at all.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.markup import markdown_table, md_link
from calbench.reproduce.comparison import STATUSES
from calbench.reproduce.published import not_reproducible
from calbench.reproduce.rendering import counts

OVERVIEW_COLUMNS = ["preset", "paper", "table", "published", *STATUSES, "not run because"]


def _abbreviated(names: list[str], shown: int = 3) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _not_run_reason(rows: pd.DataFrame) -> str:
    missing = rows[rows["status"] == "not run"]
    if missing.empty:
        return ""
    ranks = missing["dataset"].str.startswith("classifier:")
    parts = []
    if (~ranks).any():
        sets = sorted(missing.loc[~ranks, "dataset"].unique())
        parts.append(f"{len(sets)} data sets absent ({_abbreviated(sets)})")
    if ranks.any():
        parts.append("rank tables not complete")
    return "; ".join(parts)


def overview(results_dir="results") -> pd.DataFrame:
    """The overview table of every preset report under ``results_dir/reproduction``."""
    lines = []
    for path in sorted((Path(results_dir) / "reproduction").glob("*.csv")):
        report = pd.read_csv(path, keep_default_na=False, dtype=str)
        if "status" not in report:
            continue
        for (paper, table), rows in report.groupby(["paper", "table"], sort=False):
            n = counts(rows)
            lines.append([path.stem, paper, table, len(rows), *n.values(), _not_run_reason(rows)])
    return pd.DataFrame(lines, columns=OVERVIEW_COLUMNS)


def write_index(results_dir="results") -> tuple[Path, str]:
    """Write ``index.md``; returns its path and the overview as a Markdown table."""
    table = overview(results_dir)
    rendered = markdown_table(table, index=False, tablefmt="github")
    totals = table[["published", *STATUSES]].sum() if len(table) else None
    out = [
        "# Reproduction: published numbers against calbench",
        "",
        "Each preset's report sets every printed number beside calbench's, with its status, "
        "the spread of the paper's own procedure where one is run, the cause, and the "
        "stored cells it came from:",
        "",
        *[f"- {md_link(p, f'{p}.md')}" for p in dict.fromkeys(table["preset"])],
        "",
        rendered,
        "",
    ]
    if totals is not None:
        out += [
            "Totals: " + ", ".join(f"{k} {int(v)}" for k, v in totals.items()) + ".",
            "",
        ]
    out += ["## Tables that cannot be rerun", ""]
    out += [f"- {r.paper} {r.table}: {r.reason}" for r in not_reproducible().itertuples()]
    path = Path(results_dir) / "reproduction" / "index.md"
    atomic_write_text(path, "\n".join(out) + "\n")
    return path, rendered
