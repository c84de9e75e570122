"""``calbench report EXPERIMENT --html``: the experiment on one self-contained web page.

One file, ``results/reports/EXPERIMENT.html``, that opens without a network (styles, the
table-sorting script and every figure inline): the set-up (data sets with their sources,
methods with their grids and chosen points, protocol, seeds, versions); a leaderboard per
metric with its intervals and caveats, and per task the best method and whether TS can be
told from it; the experiment's ranked tables; the papers' claims with their verdicts; the
reproduction overview where ``calbench reproduce`` wrote one; every figure drawn for it;
and the cells themselves, which every per-task number and method name links to. Tables
sort by a click on a column's head (sortable-tablesort, vendored in ``assets/``).
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.markup import html_text
from calbench.results.experiment import Results
from calbench.tables.fitted import fitted_text

ASSETS = Path(__file__).with_name("assets")
#: The leaderboards a page shows unless asked for others (`calbench leaderboard`'s pair).
DEFAULT_METRICS = ("log_loss", "classwise_ece")
#: The metrics the cells table lists, where stored, after those of the leaderboards.
CELL_METRICS = ("log_loss", "brier", "accuracy", "confidence_ece", "classwise_ece")


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    html: str


def write_html_report(
    experiment: str, results_dir="results", metrics=DEFAULT_METRICS, intervals=None, parts=None
) -> Path:
    """Write the page of ``experiment`` (`BootstrapSettings` ``intervals``: its ranked tables
    with intervals, as ``calbench tables --ci``; its leaderboards those of ``metrics``;
    ``parts``: its `calbench.report.ReportParts`, where the Markdown page shares them) and
    return its path."""
    import jinja2

    import calbench
    from calbench.report import report_parts

    if parts is None:
        parts = report_parts(experiment, results_dir, metrics, intervals)
    results = parts.results
    rows = parts.rows
    results_dir = results.dir
    cells = cell_table(rows)
    sections = [
        # What a reader came for first: who wins, with its figures; then what was run.
        Section("leaderboards", "Leaderboards", leaderboards_html(results_dir, parts)),
        Section("setup", "Set-up", setup_html(results, rows, cells)),
        Section("tables", "Tables", tables_html(parts.tables)),
        Section("claims", "Claims", markdown_html(parts.claims)),
    ]
    overview = results_dir / "reproduction" / f"{experiment}.md"
    if overview.is_file():
        sections.append(
            Section("reproduction", "Reproduction", markdown_html(overview.read_text()))
        )
    sections += [
        Section("figures", "Figures", figures_html(parts.figures, experiment, results_dir)),
        Section("cells", "Cells", cells_html(cells, [*metrics, *CELL_METRICS])),
    ]
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ASSETS), autoescape=jinja2.select_autoescape(["j2"])
    )
    page = environment.get_template("report.html.j2").render(
        experiment=experiment,
        summary=(
            f"{len(cells)} cells: {cells['dataset'].nunique()} data set(s) x "
            f"{cells['method'].nunique()} method(s)"
        ),
        sections=sections,
        css=(ASSETS / "report.css").read_text(),
        sortable_css=(ASSETS / "sortable-base.min.css").read_text(),
        sortable_js=(ASSETS / "sortable.min.js").read_text(),
        version=calbench.__version__,
        results_dir=str(results_dir),
    )
    path = results_dir / "reports" / f"{experiment}.html"
    atomic_write_text(path, page)
    return path


# -- the cells ---------------------------------------------------------------------------


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
    return f'<a href="#cell-{_slug(cell_hash)}">{html_text(text)}</a>'


def method_link(label: str, methods) -> str:
    """A leaderboard's method (``ts/nll`` where it competes per criterion; ``methods``: the
    stored methods' names, which may hold a '/' themselves) to its cells."""
    method = label if label in methods else label.rsplit("/", 1)[0]
    return f'<a href="#method-{_slug(method)}">{html_text(label)}</a>'


def cells_html(cells: pd.DataFrame, metrics) -> str:
    shown = [m for m in dict.fromkeys(metrics) if m in cells]
    head = ["cell", "data set", "method", "criterion", "protocol", "folds", "seed"]
    head += ["chosen parameters", "fitted (first fold)", "fit (s)", *shown]
    lines = [_open_table(head)]
    seen_methods = set()
    for _, cell in cells.iterrows():
        anchor = ""
        if cell["method"] not in seen_methods:  # the method's first cell carries its anchor
            seen_methods.add(cell["method"])
            anchor = f' id="method-{_slug(cell["method"])}"'
        tds = [
            f'<td id="cell-{_slug(cell["config_hash"])}"><code>'
            f"{html_text(str(cell['config_hash']))}</code></td>",
            _td(cell["dataset"]),
            f"<td{anchor}>{html_text(str(cell['method']))}</td>",
            _td(cell["criterion"]),
            _td(cell["protocol"]),
            _num(cell["folds"], "{:d}"),
            _td(cell["seed"]),
            _td(_params_text(cell["params"])),
            _td(fitted_text(cell["fitted"])),
            _num(cell["fit_seconds"], "{:.3g}"),
            *(_num(cell[m], "{:.4f}") for m in shown),
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


def _params_text(params) -> str:
    try:
        value = json.loads(params) if isinstance(params, str) else {}
    except json.JSONDecodeError:
        return str(params)
    return ", ".join(f"{k} = {v}" for k, v in value.items()) or "-"


# -- the set-up --------------------------------------------------------------------------


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
        _open_table(["data set", "cells", "source", "classes", "calibration / test rows", "papers"])
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
            + _td(name)
            + _num(len(group), "{:d}")
            + f"<td>{_source_html(dataset)}</td>"
            + _td(shape.get("classes", registry.get("classes", "")))
            + _td(" / ".join(str(r) for r in rows) if any(rows) else "")
            + _td(", ".join(registry.get("papers", [])))
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
    lines = [_open_table(head)]
    for name, group in cells.groupby("method"):
        method = configs.get(group["config_hash"].iloc[0], {}).get("method") or {}
        grid = method.get("grid") or {}
        chosen = group["params"].map(_params_text).value_counts()
        lines.append(
            "<tr>"
            + _td(name)
            + _num(len(group), "{:d}")
            + _td(method.get("calibrator", ""))
            + _td(_params_text(json.dumps(method.get("params") or {})))
            + _td("; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in grid.items()) or "-")
            + _td("; ".join(f"{text} ({n}x)" for text, n in chosen.items()) if grid else "-")
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
        return _td("-")
    text = "; ".join(f"{what} on {n} of {len(chosen)} cells" for what, n in counts.items())
    if max(counts.values()) * 2 > len(chosen):
        return f'<td class="caveat">{html_text(text)}: the grid may stop short</td>'
    return _td(text)


# -- leaderboards ------------------------------------------------------------------------

#: The leaderboard's displayed columns and the numbers they sort by.
_SORT_BY = {
    "mean rank": "mean_rank",
    "win rate [95% CI]": "win_rate",
    "rank (95% set)": "rank_best",
    "blocks to tell from #1": "blocks_to_tell_from_leader",
    "clear wins [95% CI]": "clear_win_rate",
    "Bradley-Terry (Elo) [95% CI]": "strength",
    "median fit (s)": "median_fit_seconds",
}


def leaderboards_html(results_dir: Path, report) -> str:
    from calbench.plots.leaderboard import leaderboard_cd_figure
    from calbench.tables.leaderboard import caption, display_frame, few_blocks_caveat

    parts = []
    for metric, board in report.boards.items():
        parts.append(f'<h3 id="leaderboard-{_slug(metric)}">{html_text(metric)}</h3>')
        if isinstance(board, str):
            parts.append(f'<p class="note">No leaderboard: {html_text(board)}</p>')
            continue
        caveat = few_blocks_caveat(board)
        if caveat:
            parts.append(f'<p class="caveat">{html_text(caveat)}</p>')
        text = caption(board).replace(f" {caveat}", "") if caveat else caption(board)
        parts.append(f'<p class="caption">{html_text(text)}</p>')  # the caveat shown once
        methods = set(report.rows["method"])
        parts.append(_board_table(board, display_frame(board), methods))
        parts.append(_per_task_table(board, board.cells, methods))
        cd = leaderboard_cd_figure(board, results_dir / "leaderboards")
        for path in report.win_rate_figures[metric] + cd:
            parts.append(_figure(path))
    return "\n".join(parts)


def _board_table(board, shown: pd.DataFrame, methods) -> str:
    t = board.table
    lines = [_open_table(["#", "method", *shown.columns])]
    for place, method in enumerate(shown.index, start=1):
        tds = [_num(place, "{:d}"), f"<td>{method_link(method, methods)}</td>"]
        for column in shown.columns:
            key = _SORT_BY.get(column)
            if key is not None:
                sort = t.loc[method, key]
                if key == "blocks_to_tell_from_leader":  # shown as whole data sets
                    sort = np.ceil(sort)
            elif column.startswith("vs TS"):
                sort = t.loc[method, "better_than_ts"] - t.loc[method, "worse_than_ts"]
            else:
                sort = None
            tds.append(_td(shown.loc[method, column], sort))
        lines.append("<tr>" + "".join(tds) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _per_task_table(board, hashes: pd.DataFrame, methods) -> str:
    from calbench.tables.leaderboard import REFERENCE

    per_task = board.per_task
    head = ["task", "best method", f"best {board.metric}"]
    if "ts_value" in per_task:
        head += [f"TS {board.metric}"]
    if "ts_distinguishable" in per_task:
        head += ["TS told apart from the best?"]
    lines = [
        f'<p class="note">Per task: the best method on {html_text(board.metric)}; the '
        "values link to their cells.</p>",
        _open_table(head),
    ]
    for task, row in per_task.iterrows():
        best = row["best"]
        tds = [
            _td(task),
            f"<td>{method_link(best, methods)}</td>",
            _linked_value(row["best_value"], hashes.loc[task, best]),
        ]
        if "ts_value" in per_task:
            tds.append(_linked_value(row["ts_value"], hashes.loc[task, REFERENCE]))
        if "ts_distinguishable" in per_task:
            tds.append(_td("yes" if row["ts_distinguishable"] else "no (tied)"))
        lines.append("<tr>" + "".join(tds) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _linked_value(value: float, cell_hashes) -> str:
    links = " ".join(
        cell_link(h, f"{value:.4f}" if i == 0 else f"[{i + 1}]") for i, h in enumerate(cell_hashes)
    )
    return f'<td class="num" data-sort="{value!r}">{links}</td>'


# -- tables, claims, figures -------------------------------------------------------------


def tables_html(tables) -> str:
    """The ranked tables' Markdown files as HTML, or why there are none."""
    if isinstance(tables, CalbenchError):
        return f'<p class="note">No tables: {html_text(str(tables))}</p>'
    tables = list(tables)
    if not tables:
        return '<p class="note">No tables.</p>'
    # One table open (the log-loss one where there is one), the others folded under their
    # names: twenty captions in a row are a wall no one reads.
    opened = next((t for t in tables if Path(t).stem.endswith("_log_loss")), tables[0])
    intro = (
        '<p class="note">One table per stored metric; click a name to unfold its table. '
        "Subscripts are ranks within a row, bold the row's best.</p>"
    )
    return intro + "\n".join(
        f"<details{' open' if t == opened else ''}><summary>{html_text(Path(t).stem)}"
        f"</summary>\n{markdown_html(Path(t).read_text())}</details>"
        for t in tables
    )


def figures_html(paths, experiment: str, results_dir: Path) -> str:
    if not paths:
        return (
            '<p class="note">None could be drawn: <code>calbench figures --experiment '
            f"{html_text(experiment)} --results-dir {html_text(str(results_dir))}</code> "
            "says why.</p>"
        )
    return "\n".join(_figure(path) for path in paths)


def _figure(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    name = html_text(Path(path).stem)
    return (
        f'<figure id="figure-{_slug(Path(path).stem)}"><img alt="{name}" '
        f'src="data:image/png;base64,{data}"><figcaption>{name}</figcaption></figure>'
    )


def markdown_html(text: str) -> str:
    """Markdown (calbench's tables and claims) as HTML, its headings a level down and its
    tables sortable, numbers by their values."""
    import markdown

    out = _kept_to_text(markdown.markdown(text, extensions=["tables"]))
    for level in (3, 2, 1):  # the page's sections are h2
        out = out.replace(f"<h{level}>", f"<h{level + 2}>").replace(
            f"</h{level}>", f"</h{level + 2}>"
        )
    out = out.replace("<table>", '<table class="sortable">')
    return re.sub(r"<td([^>]*)>(.*?)</td>", _numeric_cell, out, flags=re.S)


#: What calbench's Markdown becomes: text, emphasis, lists and tables; nothing that runs.
_KEPT_TAGS = {
    *("p", "br", "hr", "strong", "em", "code", "pre", "sub", "sup", "u", "blockquote"),
    *("h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "a"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}


def _kept_to_text(out: str) -> str:
    """The HTML of calbench's Markdown kept to `_KEPT_TAGS`, links to this page's anchors
    and relative files, and a table column's alignment: every name is escaped where the
    Markdown is written (`calbench.markup`); this holds where one was ever missed."""
    import nh3

    return nh3.clean(
        out,
        tags=_KEPT_TAGS,
        attributes={"a": {"href"}, "th": {"style"}, "td": {"style"}},
        attribute_filter=_kept_attribute,
        filter_style_properties={"text-align"},
        url_schemes=set(),
        link_rel=None,
    )


def _kept_attribute(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "href" and not _in_report(value):
        return None
    return value


def _in_report(href: str) -> bool:
    """An anchor of this page, or a file beside it (no scheme, host or absolute path)."""
    return href.startswith("#") or not (
        ":" in href.split("/")[0] or href.startswith(("/", "\\")) or "\\" in href
    )


_LEADING_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _numeric_cell(match: re.Match) -> str:
    attributes, content = match.groups()
    text = html.unescape(re.sub(r"<[^>]+>", "", content)).replace("\u2212", "-")
    number = _LEADING_NUMBER.match(text)
    if number is None or "data-sort" in attributes:
        return match.group(0)
    return f'<td{attributes} data-sort="{float(number.group(0))!r}">{content}</td>'


# -- small pieces ------------------------------------------------------------------------


def _open_table(head) -> str:
    ths = "".join(f"<th>{html_text(str(h))}</th>" for h in head)
    return f'<table class="sortable"><thead><tr>{ths}</tr></thead><tbody>'


def _td(value, sort=None) -> str:
    text = "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)
    if sort is None or (isinstance(sort, float) and np.isnan(sort)):
        return f"<td>{html_text(text)}</td>"
    sort = 1e300 if np.isinf(sort) else float(sort)
    return f'<td class="num" data-sort="{sort!r}">{html_text(text)}</td>'


def _num(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "<td></td>"
    if fmt.endswith("d}"):
        value = int(value)
    return _td(fmt.format(value), float(value))


def _slug(text: str) -> str:
    """An anchor for a name, one for each name: letters, digits, '_' and '-' as they are,
    any other character as its code between dots (``a.b`` is ``a.2e.b``)."""
    return re.sub(r"[^A-Za-z0-9_-]", lambda m: f".{ord(m.group()):x}.", str(text)) or "."
