"""A leaderboard (`Leaderboard`, what `calbench.tables.leaderboard.leaderboard` computes) and how
it is shown: its display frame, caption and caveats, Markdown and LaTeX,
and the files `write_leaderboard` writes (split from `calbench.tables.leaderboard`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from calbench.errors import CalbenchError
from calbench.markup import markdown_table, md_text
from calbench.metrics.scoring import (
    REFUTED_BELOW,
    REFUTED_COST,
    REFUTED_MARK,
    UNCONVERGED_MARK,
)
from calbench.stats import arena
from calbench.stats.bootstrap import BootstrapSettings


@dataclass
class Leaderboard:
    experiment: str
    metric: str
    higher_is_better: bool
    #: One row per method, best win rate first: the statistics of the module docstring.
    table: pd.DataFrame
    #: tasks x methods values that were ranked.
    values: pd.DataFrame
    blocks: list[str]
    #: Per task: the best method and its value, TS's value and whether the paired test
    #: tells TS from the best.
    per_task: pd.DataFrame
    left_out: list[str] = field(default_factory=list)
    paired: bool = True
    settings: BootstrapSettings = field(default_factory=BootstrapSettings)
    #: tasks x methods: the cell hashes behind each ranked value (a report links to them).
    cells: pd.DataFrame | None = None


def _interval(value, low, high, fmt) -> str:
    if np.isnan(value):
        return ""
    return f"{value:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def display_frame(board: Leaderboard) -> pd.DataFrame:
    """The leaderboard as the Markdown and LaTeX tables print it."""
    t = board.table
    shown = pd.DataFrame(index=t.index)
    shown["mean rank"] = t["mean_rank"].map(lambda v: f"{v:.2f}")
    shown["win rate [95% CI]"] = [
        _interval(*r, ".3f") for r in t[["win_rate", "win_rate_low", "win_rate_high"]].to_numpy()
    ]
    shown["rank (95% set)"] = [
        f"{b}" if b == w else f"{b}-{w}" for b, w in t[["rank_best", "rank_worst"]].to_numpy()
    ]
    shown["blocks to tell from #1"] = t["blocks_to_tell_from_leader"].map(_blocks_needed)
    if board.paired:
        cols = ["clear_win_rate", "clear_win_rate_low", "clear_win_rate_high"]
        shown["clear wins [95% CI]"] = [_interval(*r, ".3f") for r in t[cols].to_numpy()]
    cols = ["strength", "strength_low", "strength_high"]
    shown["Bradley-Terry (Elo) [95% CI]"] = [_interval(*r, ".0f") for r in t[cols].to_numpy()]
    if "better_than_ts" in t:
        shown["vs TS: better / worse"] = [
            f"{int(b)} / {int(w)}" for b, w in t[["better_than_ts", "worse_than_ts"]].to_numpy()
        ]
    shown["median fit (s)"] = t["median_fit_seconds"].map(lambda v: f"{v:.3g}")
    if "unconverged_tasks" in t and t["unconverged_tasks"].any():
        shown[f"{UNCONVERGED_MARK} unconverged (tasks)"] = t["unconverged_tasks"].map(str)
    if "refuted_tasks" in t and t["refuted_tasks"].any():
        shown[f"{REFUTED_MARK} refuted certainties (tasks)"] = t["refuted_tasks"].map(str)
    if "mean_win_rate_over_experiments" in t:
        shown["win rate, mean of experiments'"] = t["mean_win_rate_over_experiments"].map(
            lambda v: f"{v:.3f}"
        )
    return shown


def _blocks_needed(n: float) -> str:
    if np.isnan(n):
        return "-"
    return "never (tied)" if np.isinf(n) else f"{int(np.ceil(n)):,}"


#: Fewer blocks than this and a bootstrap over blocks cannot be trusted: with 1 block every
#: resample is the same, with 2 to 4 only a handful of distinct resamples exist.
MIN_BLOCKS = 5


def few_blocks_caveat(board: Leaderboard) -> str:
    """The warning a leaderboard over fewer than `MIN_BLOCKS` blocks carries ("" otherwise)."""
    n = len(set(board.blocks))
    if n >= MIN_BLOCKS:
        return ""
    return (
        f"Only {n} block(s) of tasks: the intervals cannot be trusted (a bootstrap over "
        f"fewer than {MIN_BLOCKS} data sets has a handful of distinct resamples at most)."
    )


def caption(board: Leaderboard) -> str:
    direction = "higher" if board.higher_is_better else "lower"
    text = (
        f"Leaderboard of {board.experiment} on {board.metric} ({direction} is better) over "
        f"{len(board.values)} tasks in {len(set(board.blocks))} blocks. Win rate: the share "
        "of the other methods a method beats on a task, averaged over tasks; mean rank: "
        "its rank on each task on the unrounded values, ties at their average (1.5, 1.5, "
        "3), averaged (the tables rank their shown values, ties at the best rank: they "
        "may differ); intervals: "
        f"{board.settings.resamples} bootstrap resamples of blocks of tasks (a block: one "
        f"data set), seed {board.settings.seed}. Rank (95% set): the ranks a method takes "
        "in the central 95% of those resamples. Blocks to tell from #1: about how many data "
        "sets it takes for the interval of the win-rate gap to the leader to exclude 0 at "
        "the gap observed (the interval narrows as 1 / sqrt(data sets))."
    )
    if few_blocks_caveat(board):
        text += " " + few_blocks_caveat(board)
    if "unconverged_tasks" in board.table and board.table["unconverged_tasks"].any():
        text += (
            f" {UNCONVERGED_MARK} unconverged: the tasks on which the method's fit stopped "
            "before converging in some fold (row fit_unconverged); there its value is not "
            "the method's optimum."
        )
    if "refuted_tasks" in board.table and board.table["refuted_tasks"].any():
        text += (
            f" {REFUTED_MARK} refuted certainties: the tasks on which the method's test "
            f"predictions gave some labels a probability below {REFUTED_BELOW:g} (row "
            f"wrong_certainties), {REFUTED_COST}."
        )
    text += same_data_note(board)
    if "mean_win_rate_over_experiments" in board.table:
        text += (
            " Pooled over the experiments' tasks, on the methods all of them ran; the last "
            "column is CalArena's ranking across its collections, the mean of each "
            "experiment's own win rates."
        )
    if board.paired:
        text += (
            " Clear wins count only wins the paired bootstrap of the two methods' difference "
            f"on the task's test points tells from a tie ({100 * (1 - board.settings.alpha):g}%"
            " interval excludes 0); vs TS: tasks where the method is distinguishably better "
            "or worse than TS by that test."
        )
    else:
        text += " No paired tests: some cells were stored without predictions."
    if board.left_out:
        text += f" Left out (a method has no value there): {', '.join(board.left_out)}."
    return text


def same_data_note(board: Leaderboard) -> str:
    """Beside another experiment's results: how far its uncalibrated model's values lie from
    this one's (0 up to float32 rounding when both scored the same data)."""
    pairs = [(c, c.split(" (")[0]) for c in board.values.columns if " (" in c]
    pairs = [(other, mine) for other, mine in pairs if mine == "uncal" and mine in board.values]
    if not pairs:
        return ""
    other, mine = pairs[0]
    gap = (board.values[other] - board.values[mine]).abs().max()
    return (
        f" Same data? {mine} and {other} differ by at most {gap:.2g} in {board.metric} over "
        f"the {len(board.values)} tasks."
    )


#: The reference the per-task comparisons count against.
REFERENCE = "ts"


def ts_told_apart(best: str, told: bool) -> str:
    """The per-task column's words: "TS is the best" where it is (it said "no (tied)")."""
    if best == REFERENCE:
        return "TS is the best"
    return "yes" if told else "no (tied)"


def to_markdown(board: Leaderboard) -> str:
    frame = display_frame(board)
    frame.insert(0, "method", frame.index)
    frame.insert(0, "", range(1, len(frame) + 1))
    lines = [f"**{md_text(caption(board))}**", "", markdown_table(frame, index=False), ""]
    per_task = board.per_task.copy()
    if "ts_distinguishable" in per_task:
        per_task["ts_distinguishable"] = [
            ts_told_apart(best, told)
            for best, told in per_task[["best", "ts_distinguishable"]].to_numpy()
        ]
    lines += improvement_lines(board)
    lines += [
        "Per task: the best method, TS's value and whether the paired test tells TS from it.",
        "",
        markdown_table(per_task, floatfmt=".4f"),
    ]
    return "\n".join(lines) + "\n"


def improvement_lines(board: Leaderboard) -> list[str]:
    """CalArena's table of improvement over the uncalibrated model
    (`calbench.stats.arena.improvement_over_uncalibrated`), where ``uncal`` ranked."""
    if "uncal" not in board.values:
        return []
    table = arena.improvement_over_uncalibrated(
        board.values, board.blocks, board.higher_is_better, seed=board.settings.seed
    )
    frame = pd.DataFrame(
        {
            "improvement x 100": table["improvement"].map("{:+.3f}".format),
            "CalArena's +-": table["calarena_margin"].map("{:.3f}".format),
            "95% CI (blocks)": [
                f"[{low:+.3f}, {high:+.3f}]"
                for low, high in zip(table["low"], table["high"], strict=True)
            ],
            "rank": table["rank"],
        },
        index=table.index,
    )
    return [
        f"Improvement over the uncalibrated model: the mean over tasks of 100 x (uncal - "
        f"method){' (method - uncal for a score)' if board.higher_is_better else ''}; "
        "CalArena's margin 1.96 sd / sqrt(data sets), and the bootstrap over data sets.",
        "",
        markdown_table(frame),
        "",
    ]


def to_latex(board: Leaderboard) -> str:
    from calbench.tables.render import latex_escape

    frame = display_frame(board)
    head = ["method", *frame.columns]
    lines = [
        r"\begin{table}[t]",
        r"\centering\small",
        r"\caption{" + latex_escape(caption(board)) + "}",
        r"\begin{tabular}{l" + "r" * len(frame.columns) + "}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in head) + r" \\",
        r"\midrule",
    ]
    for method, row in frame.iterrows():
        lines.append(" & ".join(latex_escape(str(c)) for c in [method, *row]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_leaderboard(board: Leaderboard, out_dir, formats=("md", "tex", "csv")) -> list:
    from pathlib import Path

    from calbench.atomic import atomic_write_text

    stem = Path(out_dir) / f"{board.experiment}_{board.metric}"
    render = {
        "md": to_markdown,
        "tex": to_latex,
        "csv": lambda b: b.table.to_csv(float_format="%.6g"),
    }
    paths = []
    for fmt in formats:
        if fmt not in render:
            raise CalbenchError(f"Unknown leaderboard format {fmt!r}; known: {sorted(render)}.")
        path = stem.with_suffix(f".{fmt}")
        atomic_write_text(path, render[fmt](board))
        paths.append(path)
    return paths
