"""The HTML report's leaderboards: per metric its table, its caveats, the best method per
task (linked to its cells) and its figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calbench.markup import html_text
from calbench.metrics.scoring import (
    REFUTED_BELOW,
    REFUTED_COST,
    REFUTED_MARK,
    UNCONVERGED_MARK,
)
from calbench.report.html_cells import cell_link, method_link
from calbench.report.html_elements import figure, num_td, open_table, slug, td
from calbench.tables.leaderboard_text import ts_told_apart

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


def column_meanings(board) -> dict[str, str]:
    """What each leaderboard column says, in a sentence, for the columns the page shows."""
    settings = board.settings
    better = "higher" if board.higher_is_better else "lower"
    return {
        "#": f"Place, by mean rank on {board.metric} ({better} is better).",
        "method": "The calibration method; its name links to its stored cells below.",
        "mean rank": "The method's rank among the methods on a task (1 best, ties share "
        "the mean rank), averaged over the tasks.",
        "win rate [95% CI]": "The share of the other methods it beats on a task, averaged "
        f"over tasks; the interval from {settings.resamples} bootstrap resamples of the data "
        "sets (blocks of tasks).",
        "rank (95% set)": "The places it takes in the central 95% of those resamples: a "
        "narrow set is a place the data settle, a wide one a place they do not.",
        "blocks to tell from #1": "About how many data sets it would take for the interval "
        "of its win-rate gap to the leader to exclude 0, were the gap as observed; "
        "'never (tied)' where there is no gap.",
        "clear wins [95% CI]": "Win rate counting only the wins the paired bootstrap on the "
        f"task's test points tells from a tie ({100 * (1 - settings.alpha):g}% interval of "
        "the difference excludes 0).",
        "Bradley-Terry (Elo) [95% CI]": "A strength on the Elo scale fitted to all the "
        "pairwise wins and losses (400 points: 10 to 1 odds of winning).",
        "vs TS: better / worse": "Tasks where the method is distinguishably better / worse "
        "than temperature scaling by the paired test.",
        "median fit (s)": "Median seconds of its fit (grid search included) per fold.",
        f"{UNCONVERGED_MARK} unconverged (tasks)": "Tasks on which its fit stopped before "
        "converging in some fold (row fit_unconverged): there its value is not its optimum.",
        f"{REFUTED_MARK} refuted certainties (tasks)": "Tasks on which its test predictions "
        f"gave some labels a probability below {REFUTED_BELOW:g} (row wrong_certainties): "
        f"certainties the labels refuted, {REFUTED_COST}.",
        "win rate, mean of experiments'": "CalArena's ranking across its collections: the "
        "mean of each experiment's own win rate.",
    }


def _columns_legend(board, head: list[str]) -> str:
    meanings = column_meanings(board)
    items = "".join(
        f"<dt>{html_text(h)}</dt><dd>{html_text(meanings[h])}</dd>" for h in head if h in meanings
    )
    return (
        '<details class="legend"><summary>What each column means</summary>'
        f"<dl>{items}</dl></details>"
    )


def leaderboards_html(results_dir: Path, report) -> str:
    from calbench.plots.leaderboard import leaderboard_cd_figure
    from calbench.report.html_markdown import markdown_html
    from calbench.tables.leaderboard import caption, display_frame, few_blocks_caveat
    from calbench.tables.leaderboard_text import improvement_lines

    parts = []
    for metric, board in report.boards.items():
        parts.append(f'<h3 id="leaderboard-{slug(metric)}">{html_text(metric)}</h3>')
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
        improvement = improvement_lines(board)  # (the Markdown page's and the CLI's too)
        if improvement:
            parts.append(markdown_html("\n".join(improvement)))
        cd = leaderboard_cd_figure(board, results_dir / "leaderboards")
        for path in report.win_rate_figures[metric] + cd:
            parts.append(figure(path))
    return "\n".join(parts)


def _board_table(board, shown: pd.DataFrame, methods) -> str:
    t = board.table
    head = ["#", "method", *shown.columns]
    meanings = column_meanings(board)
    lines = [open_table(head, titles=[meanings.get(h, "") for h in head])]
    for place, method in enumerate(shown.index, start=1):
        tds = [num_td(place, "{:d}"), f"<td>{method_link(method, methods)}</td>"]
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
            tds.append(td(shown.loc[method, column], sort))
        lines.append("<tr>" + "".join(tds) + "</tr>")
    lines.append("</tbody></table>")
    lines.append(_columns_legend(board, head))
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
        open_table(head),
    ]
    for task, row in per_task.iterrows():
        best = row["best"]
        tds = [
            td(task),
            f"<td>{method_link(best, methods)}</td>",
            _linked_value(row["best_value"], hashes.loc[task, best]),
        ]
        if "ts_value" in per_task:
            tds.append(_linked_value(row["ts_value"], hashes.loc[task, REFERENCE]))
        if "ts_distinguishable" in per_task:
            tds.append(td(ts_told_apart(best, row["ts_distinguishable"])))
        lines.append("<tr>" + "".join(tds) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _linked_value(value: float, cell_hashes) -> str:
    links = " ".join(
        cell_link(h, f"{value:.4f}" if i == 0 else f"[{i + 1}]") for i, h in enumerate(cell_hashes)
    )
    return f'<td class="num" data-sort="{value!r}">{links}</td>'
