"""Ho's risk-vs-eps curves (Figs. 4.l-4.q) from the store: the layout ``risk_curve``.

A spec names the panels (each a list of ``method/criterion`` lines), the labels, and the
x axis (``x: {label, offset, scale}``: the plotted value is ``offset + scale * eps``, e.g.
the dangerous-class cost 100 + 900 eps). It yields

- the full curves as a long CSV: one line per (line, eps) with mean, std and folds;
- a figure per spec: one panel per entry of ``panels``, mean with a one-std band;
- a condensed "mean ± std" table at the eps of ``table_eps`` (Markdown, LaTeX), the best
  mean per column bold.

The Direct Loss is trained knowing eps, so its line has only the points it was trained at.
"""

from __future__ import annotations

import pandas as pd

from calbench.decision.family import curve_eps, curve_metric
from calbench.errors import CalbenchError
from calbench.tables.layouts import ANY, RankedTable, mean_std


def _lines(spec) -> list[str]:
    return list(dict.fromkeys(k for lines in spec["panels"].values() for k in lines))


def line_label(spec, key: str, panel_lines=None) -> str:
    """``"TS / NLL"``; within a panel whose lines share one method, the criterion alone."""
    method, criterion = key.split("/")
    method_label = spec.get("methods", {}).get(method, method)
    if criterion == "none":
        return method_label
    criterion_label = spec.get("criteria", {}).get(criterion, criterion)
    shared = {k.split("/")[0] for k in (panel_lines or []) if not k.endswith("/none")}
    return criterion_label if shared == {method} else f"{method_label} / {criterion_label}"


def curve_frame(spec: dict, rows: pd.DataFrame) -> pd.DataFrame:
    """The curves of the spec's lines: key, method, criterion, eps, x, mean, std, folds."""
    eps = rows["metric"].map(curve_eps)
    rows = rows.assign(eps=eps, key=rows["method"] + "/" + rows["criterion"])
    rows = rows[rows["eps"].notna() & rows["key"].isin(_lines(spec))]
    if rows.empty:
        raise CalbenchError(
            f"table {spec['name']}: no risk-curve points (metrics {curve_metric(0)}...) for "
            f"{_lines(spec)}; run `calbench run experiment={spec['experiment']}` first."
        )
    # Cells that share a line (e.g. a family re-run with another curve grid) give each
    # (fold, eps) once, from the most recently written cell.
    if "written" in rows:
        rows = rows.sort_values("written", ascending=False, kind="stable")
    rows = rows.drop_duplicates(["dataset", "key", "fold", "eps"])
    grouped = rows.groupby(["key", "eps"])["value"]
    frame = pd.DataFrame(
        {"mean": grouped.mean(), "std": grouped.std(ddof=1), "folds": grouped.size()}
    ).reset_index()
    frame[["method", "criterion"]] = frame["key"].str.split("/", expand=True)
    x = spec.get("x", {})
    frame["x"] = float(x.get("offset", 0.0)) + float(x.get("scale", 1.0)) * frame["eps"]
    frame["dataset"] = ", ".join(sorted(rows["dataset"].unique()))
    columns = ["dataset", "method", "criterion", "eps", "x", "mean", "std", "folds"]
    return frame.sort_values(["method", "criterion", "eps"])[columns].reset_index(drop=True)


def _table_eps(spec) -> list[float]:
    return spec.get("table_eps", [0.0, 0.25, 0.5, 0.75, 1.0])


def curve_cells(spec: dict) -> dict:
    """The store rows a risk curve's table reads (`calbench.tables.catalogue.needed_cells`):
    its lines' cells under the spec's shift, at the table's eps."""
    pairs = [tuple(key.split("/")) for key in _lines(spec)]
    shift = (spec.get("where") or {}).get("shift", "none")
    metrics = [curve_metric(eps) for eps in _table_eps(spec)]
    return {"dataset": [ANY], "pairs": pairs, "metric": metrics, "shift": [shift]}


def curve_table(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    """Mean ± std of the curves at ``table_eps`` (default: where the Direct Loss is trained)."""
    x = spec.get("x", {})
    label = x.get("label", "eps")
    points = _table_eps(spec)
    columns = {}
    for eps in points:
        value = float(x.get("offset", 0.0)) + float(x.get("scale", 1.0)) * eps
        columns[curve_metric(eps)] = f"{label} = {value:g}"
    table_rows = {}
    for key in _lines(spec):
        method, criterion = key.split("/")
        table_rows[key] = [
            spec.get("methods", {}).get(method, method),
            "-" if criterion == "none" else spec.get("criteria", {}).get(criterion, criterion),
        ]
    condensed = dict(spec, columns_by="metric", columns=columns, rows=table_rows)
    condensed.setdefault("decimals", 4)
    return mean_std(condensed, rows, direction)
