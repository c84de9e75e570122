"""``calbench report EXPERIMENT [--html]``: one page per experiment.

The Markdown page holds the experiment's leaderboards (`calbench leaderboard`), its ranked
tables (written afresh from the store), the papers' claims checked on its tasks (`calbench
claims`), the figures drawn for it (``calbench figures``, and each leaderboard's win-rate
figure), what was run (data sets, methods, folds, cells) and provenance (calbench
versions, seeds, config hashes), so a reader sees the whole reproduction at a glance.
``--html`` adds the same as one self-contained web page (`calbench.report.html`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError, nearest
from calbench.markup import md_link, md_text
from calbench.plots.write import risk_curve_files
from calbench.results.experiment import Results
from calbench.tables.write import write_tables


def claims_section(experiment: str, results_dir) -> str:
    """The papers' claims checked on the experiment's tasks, or why there are none."""
    from calbench.reproduce.claims import check_claims, to_markdown
    from calbench.stats.bootstrap import BootstrapSettings

    settings = BootstrapSettings()
    try:
        return to_markdown(
            experiment, check_claims(results_dir, experiment, settings=settings), settings
        )
    except CalbenchError as exc:
        return f"## The papers' claims on {experiment}\n\nNone checked: {md_text(exc)}"


def leaderboards(experiment: str, results_dir, metrics) -> dict:
    """Metric -> its `Leaderboard`, or the reason there is none (a string)."""
    from calbench.results.predictions import DamagedPredictions
    from calbench.results.store import DamagedCells
    from calbench.tables.leaderboard import leaderboard

    boards = {}
    for metric in metrics:
        try:
            boards[metric] = leaderboard(results_dir, experiment, metric)
        except (DamagedCells, DamagedPredictions):
            raise  # damage stops the page: it would show a board without its cells
        except CalbenchError as exc:
            boards[metric] = str(exc)
    return boards


@dataclass
class ReportParts:
    """What both pages of an experiment show, computed once: the leaderboards' paired
    tests, the claims' bootstrap and the ranked tables each read every cell's rows or
    predictions."""

    #: The results folder, read once (`calbench.results.experiment.Results`).
    results: Results
    rows: pd.DataFrame
    #: metric -> `Leaderboard`, or the reason there is none.
    boards: dict
    #: metric -> its leaderboard's win-rate figure files.
    win_rate_figures: dict
    #: The ranked tables' Markdown files, or why none could be written.
    tables: list | CalbenchError
    #: The papers' claims on the experiment (Markdown).
    claims: str
    #: The figures `calbench figures` drew for the experiment.
    figures: list


def check_metrics(results: Results, experiment: str, metrics) -> None:
    """The leaderboards asked for by name (``--metric``) must be of stored metrics: one
    line before anything is written, so the last page stays as it was."""
    stored = sorted(set(results.experiment_rows(experiment)["metric"]))
    unknown = [m for m in metrics if m not in stored]
    if unknown:
        raise CalbenchError(
            f"--metric {unknown[0]}: {experiment} stores no such metric"
            f"{nearest(unknown[0], stored)}; it stores {', '.join(stored)}."
        )


def report_parts(experiment: str, results_dir, metrics=("log_loss",), intervals=None):
    """The `ReportParts` of ``experiment``: leaderboards on ``metrics``, ranked tables
    (with ``intervals``, `BootstrapSettings`, as ``calbench tables --ci``)."""
    from calbench.plots.leaderboard import win_rate_figure

    results = Results.of(results_dir)  # read once, handed to every part
    rows = results.experiment_rows(experiment)
    boards = leaderboards(experiment, results, metrics)
    try:
        tables = write_tables(
            results,
            experiment,
            formats=("md",),
            echo=False,
            draw_curve=risk_curve_files,
            intervals=intervals,
        )
    except CalbenchError as exc:
        tables = exc
    return ReportParts(
        results=results,
        rows=rows,
        boards=boards,
        win_rate_figures={
            metric: win_rate_figure(board, results.dir / "leaderboards")
            for metric, board in boards.items()
            if not isinstance(board, str)
        },
        tables=tables,
        claims=claims_section(experiment, results),
        figures=figures_of(experiment, results),
    )


def figures_of(experiment: str, results: Results) -> list[Path]:
    """The figures drawn for ``experiment`` in this results folder; drawn now (as PNG)
    where none are, so the page shows what it reports."""
    from calbench.plots.write import write_figures

    figures = sorted((results.dir / "figures").glob(f"{experiment}_*.png"))
    if not figures:
        try:
            write_figures(experiment, results, formats=("png",))
        except CalbenchError as exc:  # none can be drawn (e.g. no stored predictions)
            print(f"no figures for {experiment}: {exc}")
        figures = sorted((results.dir / "figures").glob(f"{experiment}_*.png"))
    return figures


def leaderboard_section(parts: ReportParts) -> list[str]:
    """Each metric's leaderboard (Markdown) with its win-rate figure, or why there is none."""
    from calbench.tables.leaderboard import to_markdown

    lines = ["## Leaderboards", ""]
    for metric, board in parts.boards.items():
        if isinstance(board, str):
            lines += [f"No leaderboard on {md_text(metric)}: {md_text(board)}", ""]
            continue
        lines += [to_markdown(board), ""]
        for path in parts.win_rate_figures[metric]:
            lines += [md_link(path.stem, f"../leaderboards/{path.name}", image=True), ""]
    return lines


def write_report(
    experiment: str, results_dir="results", intervals=None, metrics=("log_loss",), parts=None
) -> Path:
    """The page of ``experiment``; with ``intervals`` (`BootstrapSettings`) its tables carry
    bootstrap intervals and marks (`calbench tables --ci`); its leaderboards those of
    ``metrics``. ``parts``: its `ReportParts`, where the HTML page shares them."""
    if parts is None:
        parts = report_parts(experiment, results_dir, metrics, intervals)
    if isinstance(parts.tables, CalbenchError):
        raise parts.tables
    rows, figures = parts.rows, parts.figures
    results_dir = Path(results_dir)
    cells = rows.drop_duplicates("config_hash")
    seeds = ", ".join(map(str, sorted(rows["seed"].unique())))
    lines = [
        f"# Experiment `{experiment}`",
        "",
        f"{len(cells)} cells: data sets {_listed(rows['dataset'])}; "
        f"methods {_listed(rows['method'])}; protocol {_listed(rows['protocol'])} with "
        f"{rows['fold'].nunique()} fold(s); seeds {seeds}.",
        f"Fit time over all cells and folds: "
        f"{rows.drop_duplicates(['config_hash', 'fold'])['fit_seconds'].sum():.1f} s.",
        "",
    ]
    lines += leaderboard_section(parts)
    lines += ["## Tables", ""]
    for path in parts.tables:
        lines += [path.read_text(), ""]
    lines += [parts.claims, "", "## Figures", ""]
    if figures:
        lines += [md_link(p.stem, f"../figures/{p.name}", image=True) for p in figures]
    else:
        lines.append(
            f"None could be drawn: `calbench figures --experiment {experiment} --results-dir "
            f"{results_dir}` says why."
        )
    lines += [
        "",
        "## Provenance",
        "",
        f"calbench version(s): {', '.join(sorted(rows['calbench_version'].astype(str).unique()))}.",
        "Each cell's rows and resolved config are in `store/<config_hash>.csv|yaml`:",
        "",
        "| dataset | method | criterion | config hash |",
        "|---|---|---|---|",
    ]
    for _, cell in cells.sort_values(["dataset", "method"]).iterrows():
        lines.append(
            f"| {md_text(cell['dataset'])} | {md_text(cell['method'])} | "
            f"{md_text(cell['criterion'])} | "
            f"`{cell['config_hash']}` |"
        )
    path = results_dir / "reports" / f"{experiment}.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def _listed(names: pd.Series) -> str:
    return ", ".join(md_text(n) for n in sorted(names.astype(str).unique()))
