"""Critical-difference diagrams (Demšar 2006; Kull Fig. 3a), laid out in inches: the
better half's names stand left of the rank axis and the other half's right of it, each
joined to its rank by an elbow line, the rows far enough apart that no line or name touches
another, and the figure as tall as its rows need."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.textpath import TextPath

from calbench.plots.output import plt, save_figure
from calbench.stats.ranks import FriedmanResult, friedman

FONT = 7  # the names' size, points
PAD = 0.05  # between a name and its line's end, inches
ROW = 0.17  # between two names' rows, inches
CLIQUE = 0.09  # between two bars of not-significantly-different methods, inches
TICK_SPACING = 0.22  # the least room for a rank's number on the axis, inches
AXIS_Y = 0.62  # the rank axis, inches below the top of the axes


def _label_width(text: str) -> float:
    """A name's width in inches at ``FONT`` points."""
    return TextPath((0, 0), text, size=FONT).get_extents().width / 72


def _cliques(values: np.ndarray, cd: float) -> list[tuple[int, int]]:
    """Maximal runs of methods (sorted by rank) whose ranks lie within ``cd`` of each other."""
    cliques = []
    for i in range(len(values)):
        j = int(np.searchsorted(values, values[i] + cd, side="left")) - 1
        if j > i and not any(a <= i and j <= b for a, b in cliques):
            cliques.append((i, j))
    return cliques


def _height(k: int, n_cliques: int) -> float:
    """The axes' height in inches: the axis, the clique bars, then the rows of names."""
    return AXIS_Y + CLIQUE * (n_cliques + 1) + ROW * ((k + 1) // 2) + 0.1


def cd_diagram(ax, result: FriedmanResult, title=""):
    """Average ranks on an axis, best to the left, the CD as a bar, and thick lines joining
    methods whose ranks differ by less than the CD (not significantly different). The
    axes' y is in inches from its top, as `_height` sizes it."""
    ranks = result.average_ranks
    k = len(ranks)
    values = ranks.to_numpy()
    labels = [f"{name} ({rank:.2f})" for name, rank in ranks.items()]
    half = (k + 1) // 2
    cd = result.critical_difference
    cliques = _cliques(values, cd)
    left_margin = max(_label_width(t) for t in labels[:half]) + 3 * PAD
    right_margin = max((_label_width(t) for t in labels[half:]), default=0) + 3 * PAD
    width = ax.figure.get_size_inches()[0] * ax.get_position().width
    per_inch = (k - 1) / max(width - left_margin - right_margin, 1.0)
    ax.set_xlim(1 - left_margin * per_inch, k + right_margin * per_inch)
    ax.set_ylim(_height(k, len(cliques)), 0)
    ax.hlines(AXIS_Y, 1, k, color="black", linewidth=1)
    every = max(1, math.ceil(TICK_SPACING * per_inch))
    for r in range(1, k + 1):
        ax.vlines(r, AXIS_Y - 0.03, AXIS_Y + 0.03, color="black", linewidth=1)
        if (r - 1) % every == 0 or r == k:
            ax.text(r, AXIS_Y - 0.06, str(r), ha="center", va="bottom", fontsize=8)
    ax.hlines(0.22, 1, 1 + cd, color="#d62728", linewidth=2)
    ax.text(1 + cd / 2, 0.19, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=FONT)
    for n, (i, j) in enumerate(cliques):
        y = AXIS_Y + CLIQUE * (n + 1)
        ax.hlines(y, values[i] - 0.03, values[j] + 0.03, color="black", linewidth=3)
    first_row = AXIS_Y + CLIQUE * (len(cliques) + 1)
    pad = PAD * per_inch
    for i, (text, rank) in enumerate(zip(labels, values, strict=True)):
        left = i < half
        y = first_row + ROW * (i if left else k - 1 - i)
        end = 1 - pad if left else k + pad
        ax.plot([rank, rank, end], [AXIS_Y, y, y], color="black", linewidth=0.8)
        x = end - pad if left else end + pad
        ax.text(x, y, text, ha="right" if left else "left", va="center", fontsize=FONT)
    ax.set_axis_off()
    ax.set_title(
        f"{title}  Friedman p = {result.p_value:.2g}, {result.test} "
        f"(alpha {result.alpha}), N = {result.n_tasks}",
        fontsize=8,
    )
    return ax


def cd_figure(values, higher_is_better: bool, title: str, out_dir, name: str, formats, width=7):
    """The CD diagram of a tasks x methods table (complete rows) as files ``name.FORMAT``;
    none for fewer than 2 tasks or 3 methods, where there are no ranking statistics."""
    if len(values) < 2 or values.shape[1] < 3:
        return []
    result = friedman(values, higher_is_better)
    height = _height(
        values.shape[1], len(_cliques(result.average_ranks.to_numpy(), result.critical_difference))
    )
    title_room = 0.35
    fig = plt.figure(figsize=(width, height + title_room))
    ax = fig.add_axes((0.0, 0.0, 1.0, height / (height + title_room)))
    cd_diagram(ax, result, title=title)
    return save_figure(fig, out_dir, name, formats)
