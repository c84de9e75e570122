"""Ho Figs. 4.l-4.q: test risk against eps, one panel per parametrization, mean with a
one-standard-deviation band over the outer folds."""

from __future__ import annotations

import textwrap

from calbench.plots.output import plt
from calbench.tables.curves import line_label


def risk_curve_figure(spec: dict, frame):
    """A figure of the curves in ``frame`` (see `calbench.tables.curves.curve_frame`)."""
    panels = spec["panels"]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(max(4.2 * len(panels), 7.0), 3.6), sharey=True, squeeze=False
    )
    keys = frame["method"] + "/" + frame["criterion"]
    for ax, (title, lines) in zip(axes[0], panels.items(), strict=True):
        for key in lines:
            line = frame[keys == key]
            if line.empty:
                continue
            style = "--" if key.endswith("/none") else ("o-" if len(line) <= 5 else "-")
            label = line_label(spec, key, lines)
            drawn = ax.plot(line["x"], line["mean"], style, label=label, markersize=4)
            std = line["std"].fillna(0.0)
            ax.fill_between(
                line["x"], line["mean"] - std, line["mean"] + std, alpha=0.15,
                color=drawn[0].get_color(),
            )  # fmt: skip
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(spec.get("x", {}).get("label", "eps"))
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no results yet", ha="center", transform=ax.transAxes)
    axes[0, 0].set_ylabel(spec.get("y_label", "test empirical risk (mean per sample)"))
    title = textwrap.fill(spec.get("title", spec["name"]), 40 * max(len(panels), 2))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
