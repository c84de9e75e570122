"""Critical-difference diagrams (Demšar 2006; Kull Fig. 3a)."""

from __future__ import annotations

import numpy as np

from calbench.plots.output import plt, save_figure
from calbench.stats.ranks import FriedmanResult, friedman


def cd_diagram(ax, result: FriedmanResult, title=""):
    """Average ranks on an axis, best to the left, the CD as a bar, and thick lines joining
    methods whose ranks differ by less than the CD (not significantly different)."""
    ranks = result.average_ranks
    k = len(ranks)
    ax.set_xlim(1 - 0.2, k + 0.2)
    ax.set_ylim(0, 1)
    ax.hlines(0.8, 1, k, color="black", linewidth=1)
    for r in range(1, k + 1):
        ax.vlines(r, 0.78, 0.82, color="black", linewidth=1)
        ax.text(r, 0.85, str(r), ha="center", fontsize=8)
    cd = result.critical_difference
    ax.hlines(0.95, 1, 1 + cd, color="#d62728", linewidth=2)
    ax.text(1 + cd / 2, 0.96, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=7)
    values = ranks.to_numpy()
    cliques = []
    for i in range(k):
        j = int(np.searchsorted(values, values[i] + cd, side="left")) - 1
        if j > i and not any(a <= i and j <= b for a, b in cliques):
            cliques.append((i, j))
    for n, (i, j) in enumerate(cliques):
        y = 0.76 - 0.03 * n
        ax.hlines(y, values[i] - 0.03, values[j] + 0.03, color="black", linewidth=3)
    half = (k + 1) // 2
    # Labels stacked down from below the clique bars, closer together for many methods so
    # that all stay on the axes.
    top = min(0.7, 0.73 - 0.03 * len(cliques))
    step = min(0.08, (top - 0.05) / half)
    for i, (name, rank) in enumerate(ranks.items()):
        left = i < half
        level = top - step * (i if left else k - 1 - i)
        end = 1 - 0.2 if left else k + 0.2
        ax.plot([rank, rank, end], [0.8, level, level], color="black", linewidth=0.8)
        ax.text(
            end,
            level + 0.01,
            f"{name} ({rank:.2f})",
            ha="left" if left else "right",
            va="bottom",
            fontsize=7,
        )
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
    fig, ax = plt.subplots(figsize=(width, 2.2 + 0.15 * values.shape[1]))
    cd_diagram(ax, friedman(values, higher_is_better), title=title)
    return save_figure(fig, out_dir, name, formats)
