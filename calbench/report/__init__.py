"""``calbench report EXPERIMENT [--html]``: one page per experiment.

The Markdown page holds the experiment's leaderboards (`calbench leaderboard`), its ranked
tables (written afresh from the store), the papers' claims checked on its tasks (`calbench
claims`), the figures drawn for it (``calbench figures``, and each leaderboard's win-rate
figure), what was run (data sets, methods, folds, cells) and provenance (calbench
versions, seeds, config hashes), so a reader sees the whole reproduction at a glance.
``--html`` adds the same as one self-contained web page (`calbench.report.html`).
"""

from __future__ import annotations

from pathlib import Path

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.plots.write import risk_curve_files
from calbench.runner.store import ResultStore, experiment_rows
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
        return f"## The papers' claims on {experiment}\n\nNone checked: {exc}"


def leaderboards(experiment: str, results_dir, metrics) -> dict:
    """Metric -> its `Leaderboard`, or the reason there is none (a string): computed once
    for both pages (the paired tests read every cell's predictions)."""
    from calbench.tables.leaderboard import leaderboard

    boards = {}
    for metric in metrics:
        try:
            boards[metric] = leaderboard(results_dir, experiment, metric)
        except CalbenchError as exc:
            boards[metric] = str(exc)
    return boards


def leaderboard_section(results_dir, boards: dict) -> list[str]:
    """Each metric's leaderboard (Markdown) with its win-rate figure, or why there is none."""
    from calbench.plots.leaderboard import win_rate_figure
    from calbench.tables.leaderboard import to_markdown

    lines = ["## Leaderboards", ""]
    for metric, board in boards.items():
        if isinstance(board, str):
            lines += [f"No leaderboard on {metric}: {board}", ""]
            continue
        lines += [to_markdown(board), ""]
        for path in win_rate_figure(board, Path(results_dir) / "leaderboards"):
            lines += [f"![{path.stem}](../leaderboards/{path.name})", ""]
    return lines


def write_report(
    experiment: str, results_dir="results", intervals=None, metrics=("log_loss",), boards=None
) -> Path:
    """The page of ``experiment``; with ``intervals`` (`BootstrapSettings`) its tables carry
    bootstrap intervals and marks (`calbench tables --ci`); its leaderboards: ``boards``
    (`leaderboards`), else those of ``metrics``."""
    rows = experiment_rows(ResultStore(results_dir), experiment)
    results_dir = Path(results_dir)
    tables = write_tables(
        results_dir,
        experiment,
        formats=("md",),
        echo=False,
        draw_curve=risk_curve_files,
        intervals=intervals,
    )
    figures = sorted((results_dir / "figures").glob(f"{experiment}_*.png"))
    cells = rows.drop_duplicates("config_hash")
    seeds = ", ".join(map(str, sorted(rows["seed"].unique())))
    lines = [
        f"# Experiment `{experiment}`",
        "",
        f"{len(cells)} cells: data sets {', '.join(sorted(rows['dataset'].unique()))}; "
        f"methods {', '.join(sorted(rows['method'].unique()))}; protocol "
        f"{', '.join(sorted(rows['protocol'].unique()))} with "
        f"{rows['fold'].nunique()} fold(s); seeds {seeds}.",
        f"Fit time over all cells and folds: "
        f"{rows.drop_duplicates(['config_hash', 'fold'])['fit_seconds'].sum():.1f} s.",
        "",
    ]
    if boards is None:
        boards = leaderboards(experiment, results_dir, metrics)
    lines += leaderboard_section(results_dir, boards)
    lines += ["## Tables", ""]
    for path in tables:
        lines += [path.read_text(), ""]
    lines += [claims_section(experiment, results_dir), "", "## Figures", ""]
    if figures:
        lines += [f"![{p.stem}](../figures/{p.name})" for p in figures]
    else:
        lines.append(
            f"None drawn yet: `calbench figures --experiment {experiment}` (`--ci` for "
            "bootstrap intervals on the reliability diagrams)."
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
            f"| {cell['dataset']} | {cell['method']} | {cell['criterion']} | "
            f"`{cell['config_hash']}` |"
        )
    path = results_dir / "reports" / f"{experiment}.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
