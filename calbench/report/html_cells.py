"""The HTML report's cells: one row per cell, which every per-task number and method name
links to."""

from __future__ import annotations

import json

import pandas as pd

from calbench.markup import html_text
from calbench.report.html_elements import num_td, open_table, slug, td
from calbench.tables.fitted import fitted_text


def cell_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its labels, folds, seconds, chosen parameters and each metric's
    mean over its folds (a column per metric)."""
    keys = ["config_hash", "dataset", "method", "criterion", "protocol", "seed"]
    per_fold = rows.drop_duplicates(["config_hash", "fold"])
    cells = (
        per_fold.sort_values("fold")
        .groupby(keys, dropna=False)
        .agg(
            folds=("fold", "nunique"),
            fit_seconds=("fit_seconds", "sum"),
            params=("params", "first"),
            fitted=("fitted", "first"),
        )
    )
    values = rows.groupby(["config_hash", "metric"])["value"].mean().unstack("metric")
    cells = cells.reset_index().join(values, on="config_hash")
    return cells.sort_values(["method", "dataset"]).reset_index(drop=True)


def cell_link(cell_hash: str, text: str) -> str:
    return f'<a href="#cell-{slug(cell_hash)}">{html_text(text)}</a>'


def method_link(label: str, methods) -> str:
    """A leaderboard's method (``ts/nll`` where it competes per criterion; ``methods``: the
    stored methods' names, which may hold a '/' themselves) to its cells."""
    method = label if label in methods else label.rsplit("/", 1)[0]
    return f'<a href="#method-{slug(method)}">{html_text(label)}</a>'


def cells_html(cells: pd.DataFrame, metrics) -> str:
    shown = [m for m in dict.fromkeys(metrics) if m in cells]
    head = ["cell", "data set", "method", "criterion", "protocol", "folds", "seed"]
    head += ["chosen parameters", "fitted (first fold)", "fit (s)", *shown]
    lines = [open_table(head)]
    seen_methods = set()
    for _, cell in cells.iterrows():
        anchor = ""
        if cell["method"] not in seen_methods:  # the method's first cell carries its anchor
            seen_methods.add(cell["method"])
            anchor = f' id="method-{slug(cell["method"])}"'
        tds = [
            f'<td id="cell-{slug(cell["config_hash"])}"><code>'
            f"{html_text(str(cell['config_hash']))}</code></td>",
            td(cell["dataset"]),
            f"<td{anchor}>{html_text(str(cell['method']))}</td>",
            td(cell["criterion"]),
            td(cell["protocol"]),
            num_td(cell["folds"], "{:d}"),
            td(cell["seed"]),
            td(params_text(cell["params"])),
            td(fitted_text(cell["fitted"])),
            num_td(cell["fit_seconds"], "{:.3g}"),
            *(num_td(cell[m], "{:.4f}") for m in shown),
        ]
        lines.append("<tr>" + "".join(tds) + "</tr>")
    lines.append("</tbody></table>")
    intro = (
        '<p class="note">Each cell is one data set x method x criterion under the '
        "protocol; its rows and resolved config are in the store as "
        "<code>store/HASH.csv</code> and <code>store/HASH.yaml</code>. Metrics: the mean over "
        "its folds.</p>"
    )
    return intro + "\n".join(lines)


def params_text(params) -> str:
    try:
        value = json.loads(params) if isinstance(params, str) else {}
    except json.JSONDecodeError:
        return str(params)
    return ", ".join(f"{k} = {v}" for k, v in value.items()) or "-"
