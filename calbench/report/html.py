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

from dataclasses import dataclass
from pathlib import Path

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.markup import html_text
from calbench.report.html_cells import cell_table, cells_html
from calbench.report.html_elements import figure
from calbench.report.html_leaderboards import leaderboards_html
from calbench.report.html_markdown import markdown_html
from calbench.report.html_setup import setup_html

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
    return "\n".join(figure(path) for path in paths)
