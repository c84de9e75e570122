"""Renderers of a `RankedTable`: Markdown, LaTeX (booktabs) and CSV.

Each value carries its rank as a subscript (unless the table says otherwise); the best
value of a row (rank 1) is bold, and where the table asks the second best is underlined.
"""

from __future__ import annotations

import math

import pandas as pd

from calbench.markup import md_text
from calbench.metrics.scoring import REFUTED_MARK, UNCONVERGED_MARK
from calbench.tables.layouts import RankedTable


def _cells(
    table: RankedTable,
    value_fmt,
    best_fmt,
    rank_fmt,
    second_fmt=None,
    tie_mark="†",
    flag=REFUTED_MARK,
    unconverged_mark=UNCONVERGED_MARK,
):
    body = []
    decimals = table.column_decimals or [table.decimals] * len(table.columns)
    for i, (group, label) in enumerate(table.row_labels):
        cells = []
        for j in range(len(table.columns)):
            value, rank = table.values[i, j], table.ranks[i, j]
            if math.isnan(value):
                cells.append("")
                continue
            text = f"{value:.{decimals[j]}f}"
            if table.stds is not None and not math.isnan(table.stds[i, j]):
                text += f" ± {table.stds[i, j]:.{decimals[j]}f}"
            text = value_fmt(text)
            if rank == 1:
                text = best_fmt(text)
            elif rank == 2 and table.underline_second and second_fmt is not None:
                text = second_fmt(text)
            if table.lower is not None and not math.isnan(table.lower[i, j]):
                low, high = table.lower[i, j], table.upper[i, j]
                text += f" [{low:.{decimals[j]}f}, {high:.{decimals[j]}f}]"
                if table.tied_with_best[i, j]:
                    text += tie_mark
            if table.flagged is not None and table.flagged[i, j]:
                text += flag
            if table.unconverged is not None and table.unconverged[i, j]:
                text += unconverged_mark
            if table.show_ranks and not math.isnan(rank):
                text += rank_fmt(int(rank))
            cells.append(text)
        body.append((group, label, cells))
    return body


def _average_cells(values):
    return ["" if math.isnan(v) else f"{v:.1f}" for v in values]


def _group_label(groups, group, previous):
    return group if group != previous else ""


def to_markdown(table: RankedTable) -> str:
    grouped = any(g for g, _ in table.row_labels)
    head = ([""] if grouped else []) + [""] + [md_text(c) for c in table.columns]
    lines = [
        f"**{md_text(table.caption)}**",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    body = _cells(
        table, str, lambda t: f"**{t}**", lambda r: f"<sub>{r}</sub>", lambda t: f"<u>{t}</u>"
    )
    previous = None
    for idx, (group, label, cells) in enumerate(body):
        lead = [md_text(_group_label(grouped, group, previous))] if grouped else []
        lines.append("| " + " | ".join(lead + [md_text(label)] + cells) + " |")
        previous = group
        last_of_group = idx + 1 == len(body) or body[idx + 1][0] != group
        if last_of_group:
            averages = dict(table.average_rows).get(group)
            if averages is not None:
                lead = [""] if grouped else []
                lines.append(
                    "| " + " | ".join(lead + ["average rank"] + _average_cells(averages)) + " |"
                )
    if table.missing:
        lines += ["", "Not yet in the store: " + ", ".join(map(md_text, table.missing)) + "."]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
        ("†", r"\textdagger{}"),
        (REFUTED_MARK, r"\textdaggerdbl{}"),
        (UNCONVERGED_MARK, r"\S{}"),
    ):
        text = text.replace(a, b)
    return text


def to_latex(table: RankedTable) -> str:
    grouped = any(g for g, _ in table.row_labels)
    n_lead = 2 if grouped else 1
    head = [""] * n_lead + [latex_escape(c) for c in table.columns]
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\caption{" + latex_escape(table.caption) + "}",
        r"\label{tab:" + table.name.replace("_", "-") + "}",
        r"\begin{tabular}{" + "l" * n_lead + "r" * len(table.columns) + "}",
        r"\toprule",
        " & ".join(head) + r" \\",
        r"\midrule",
    ]
    body = _cells(
        table,
        str,
        lambda t: rf"\textbf{{{t}}}",
        lambda r: rf"$_{{{r}}}$",
        lambda t: rf"\underline{{{t}}}",
        tie_mark=r"$^\dagger$",
        flag=r"$^\ddagger$",
        unconverged_mark=r"$^\S$",
    )
    previous = None
    for idx, (group, label, cells) in enumerate(body):
        lead = [latex_escape(_group_label(grouped, group, previous))] if grouped else []
        lines.append(" & ".join(lead + [latex_escape(label)] + cells) + r" \\")
        previous = group
        if idx + 1 == len(body) or body[idx + 1][0] != group:
            averages = dict(table.average_rows).get(group)
            if averages is not None:
                lead = [""] if grouped else []
                lines.append(
                    " & ".join(lead + ["average rank"] + _average_cells(averages)) + r" \\"
                )
                lines.append(r"\midrule" if idx + 1 < len(body) else r"\bottomrule")
    lines.append(r"\end{tabular}")
    if table.missing:
        lines.append(
            r"\par\smallskip{\footnotesize Not yet in the store: "
            + latex_escape(", ".join(table.missing))
            + ".}"
        )
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(table: RankedTable) -> str:
    records = []
    for i, (group, label) in enumerate(table.row_labels):
        for j, column in enumerate(table.columns):
            records.append(
                {
                    "group": group,
                    "row": label,
                    "column": column,
                    "value": table.values[i, j],
                    "std": table.stds[i, j] if table.stds is not None else float("nan"),
                    "rank": table.ranks[i, j],
                    "wrong_certainties": bool(table.flagged is not None and table.flagged[i, j]),
                    "fit_unconverged": bool(
                        table.unconverged is not None and table.unconverged[i, j]
                    ),
                    **_interval_record(table, i, j),
                }
            )
    for group, averages in table.average_rows:
        for j, column in enumerate(table.columns):
            records.append(
                {
                    "group": group,
                    "row": "average rank",
                    "column": column,
                    "value": averages[j],
                    "rank": float("nan"),
                }
            )
    return pd.DataFrame(records).to_csv(index=False)


def _interval_record(table: RankedTable, i: int, j: int) -> dict:
    if table.lower is None:
        return {}
    return {
        "lower": table.lower[i, j],
        "upper": table.upper[i, j],
        "tied_with_best": bool(table.tied_with_best[i, j]),
    }


RENDERERS = {"md": to_markdown, "tex": to_latex, "csv": to_csv}
