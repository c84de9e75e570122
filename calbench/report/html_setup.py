"""The HTML report's set-up: data sets with their sources, methods with their grids and
chosen points, protocol, seeds and versions."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from calbench.errors import CalbenchError
from calbench.markup import html_text
from calbench.report.html_cells import params_text
from calbench.report.html_elements import num_td, open_table, td
from calbench.results.experiment import Results


def setup_html(results: Results, rows: pd.DataFrame, cells: pd.DataFrame) -> str:
    configs = {h: _config(results, h) for h in cells["config_hash"]}
    parts = ["<h3>Data sets</h3>", data_sets_html(cells, configs)]
    parts += ["<h3>Methods</h3>", methods_html(cells, configs)]
    protocols = sorted(
        {
            ", ".join(f"{k} = {v}" for k, v in (c.get("protocol") or {}).items())
            for c in configs.values()
        }
    )
    versions = ", ".join(sorted(rows["calbench_version"].astype(str).unique()))
    stored = rows["stored_at"].astype(str) if "stored_at" in rows else pd.Series([], dtype=str)
    parts += [
        "<h3>Protocol and provenance</h3>",
        "<ul>",
        *(f"<li>protocol: {html_text(p)}</li>" for p in protocols),
        f"<li>seeds: {html_text(', '.join(map(str, sorted(rows['seed'].unique()))))}</li>",
        f"<li>calbench version(s): {html_text(versions)}</li>",
    ]
    if len(stored):
        parts.append(f"<li>stored from {html_text(stored.min())} to {html_text(stored.max())}</li>")
    parts.append("</ul>")
    return "\n".join(parts)


def _config(results: Results, cell_hash: str) -> dict:
    try:
        return results.config(cell_hash) or {}
    except (OSError, CalbenchError, ValueError):
        return {}


def data_sets_html(cells: pd.DataFrame, configs: dict) -> str:
    lines = [
        open_table(["data set", "cells", "source", "classes", "calibration / test rows", "papers"])
    ]
    for name, group in cells.groupby("dataset"):
        config = configs.get(group["config_hash"].iloc[0], {})
        dataset = config.get("dataset") or {}
        registry = dataset.get("registry") or {}
        shape = config.get("shape") or {}  # as the cell ran on it (a user's file has no entry)
        rows = [
            shape.get("calibration_rows", registry.get("n_cal")),
            shape.get("test_rows", registry.get("n_test")),
        ]
        lines.append(
            "<tr>"
            + td(name)
            + num_td(len(group), "{:d}")
            + f"<td>{_source_html(dataset)}</td>"
            + td(shape.get("classes", registry.get("classes", "")))
            + td(" / ".join(str(r) for r in rows) if any(rows) else "")
            + td(", ".join(registry.get("papers", [])))
            + "</tr>"
        )
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _source_html(dataset: dict) -> str:
    """Where a data set's scores came from: the registry's download addresses, or the
    user's file and its loader."""
    files = (dataset.get("registry") or {}).get("files") or []
    links = [
        f'<a href="{html_text(url)}">{html_text(f["name"])}</a>'
        for f in files
        for url in (f.get("urls") or [])[:1]
        if str(url).startswith(("https://", "http://"))
    ]
    if links:
        return ", ".join(links)
    path = dataset.get("path")
    loader = dataset.get("loader", "")
    if path:
        return f"<code>{html_text(Path(str(path)).name)}</code> ({html_text(str(loader))})"
    return html_text(str(loader or "generated"))


def methods_html(cells: pd.DataFrame, configs: dict) -> str:
    head = ["method", "cells", "calibrator", "fixed parameters", "grid", "chosen", "grid's edge"]
    lines = [open_table(head)]
    for name, group in cells.groupby("method"):
        method = configs.get(group["config_hash"].iloc[0], {}).get("method") or {}
        grid = method.get("grid") or {}
        chosen = group["params"].map(params_text).value_counts()
        lines.append(
            "<tr>"
            + td(name)
            + num_td(len(group), "{:d}")
            + td(method.get("calibrator", ""))
            + td(params_text(json.dumps(method.get("params") or {})))
            + td("; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in grid.items()) or "-")
            + td("; ".join(f"{text} ({n}x)" for text, n in chosen.items()) if grid else "-")
            + _edge_td(grid, group["params"])
            + "</tr>"
        )
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _edge_td(grid: dict, chosen) -> str:
    """How many cells chose a value at an edge of the grid, per key: a choice at the edge
    on most cells says the grid stopped short (``+protocol.widen_edges=2``)."""
    from calbench.runner.grid import edge_choices

    counts: dict[str, int] = {}
    for params in chosen:
        try:
            point = json.loads(params) if isinstance(params, str) else {}
        except json.JSONDecodeError:
            continue
        for key, side in edge_choices(grid, point).items():
            counts[f"{key} at its {side}"] = counts.get(f"{key} at its {side}", 0) + 1
    if not counts:
        return td("-")
    text = "; ".join(f"{what} on {n} of {len(chosen)} cells" for what, n in counts.items())
    if max(counts.values()) * 2 > len(chosen):
        return f'<td class="caveat">{html_text(text)}: the grid may stop short</td>'
    return td(text)
