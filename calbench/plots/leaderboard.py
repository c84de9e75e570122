"""A leaderboard's figures: win-rate bars with their interval whiskers (CalArena's headline,
with the clear wins drawn inside each bar) and the critical-difference diagram."""

from __future__ import annotations

import numpy as np

from calbench.plots.cd_diagram import cd_figure
from calbench.plots.output import plt, save_figure
from calbench.tables.leaderboard import Leaderboard, few_blocks_caveat

#: Fewer ranked tasks than this and no CD diagram is drawn (with 2 tasks and 10 methods the
#: critical difference is 9.6 ranks: a diagram that can separate nothing).
MIN_CD_TASKS = 5


def win_rate_figure(board: Leaderboard, out_dir, formats=("png",)) -> list:
    t = board.table.iloc[::-1]  # best at the top
    y = np.arange(len(t))
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.28 * len(t)))
    whiskers = [t["win_rate"] - t["win_rate_low"], t["win_rate_high"] - t["win_rate"]]
    ax.barh(y, t["win_rate"], color="#9ecae1", label="win rate", height=0.75)
    ax.errorbar(t["win_rate"], y, xerr=whiskers, fmt="none", ecolor="black", capsize=2, lw=0.8)
    if board.paired:
        ax.barh(y, t["clear_win_rate"], color="#2171b5", height=0.4, label="clear wins")
    ax.set_yticks(y, t.index, fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the other methods beaten on a task, mean over tasks")
    ax.legend(loc="lower right", fontsize=8)
    caveat = few_blocks_caveat(board)
    ax.set_title(
        f"{board.experiment}: win rates on {board.metric} over {len(board.values)} tasks\n"
        "whiskers: 95% block-bootstrap interval"
        + ("; dark: wins the paired test confirms" if board.paired else "")
        + (f"\n{caveat.split(':')[0]}: intervals not to be trusted" if caveat else ""),
        fontsize=9,
        color="black" if not caveat else "#a50f15",
    )
    return save_figure(fig, out_dir, f"{board.experiment}_{board.metric}_winrate", formats)


def leaderboard_cd_figure(board: Leaderboard, out_dir, formats=("png",)) -> list:
    """The CD diagram of the leaderboard's ranked tasks (none for fewer than
    `MIN_CD_TASKS` tasks, where the Friedman test has no power, or 3 methods)."""
    if len(board.values) < MIN_CD_TASKS:
        return []
    return cd_figure(
        board.values,
        board.higher_is_better,
        f"{board.experiment}: mean ranks on {board.metric};",
        out_dir,
        f"{board.experiment}_{board.metric}_cd",
        formats,
        width=8,
    )
