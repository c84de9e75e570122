"""KS calibration graphs (Gupta et al. 2021, Fig. 1 a-b) and Hoki's ECE-variance scatter."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.ticker import MaxNLocator

from calbench.metrics.ks import cumulative_curves, ks_error, ks_scores


def ks_curves(ax_fractile, ax_score, probs, y, title="", mode="top", r=1, fold_sizes=None):
    """(a) cumulative score and cumulative outcome against the fractile of the data;
    (b) the same against the cumulative score, so the score curve is the diagonal. The KS
    error is the largest vertical gap. The title gives it as the tables do (`ks_fold_mean`:
    ``ks_error``, a fraction to 4 decimals, the mean over ``fold_sizes``' folds); returned."""
    scores, outcomes = ks_scores(probs, y, mode, r)
    fractile, cum_score, cum_outcome = cumulative_curves(scores, outcomes)
    gaps = np.abs(cum_score - cum_outcome)
    ks = ks_fold_mean(probs, y, mode, r, fold_sizes)
    # The error is taken on every point; the curves are drawn through at most ~2000 of them
    # (the largest gap included): 100,000-point lines make PDFs slow and look no different.
    shown = np.union1d(
        np.linspace(0, len(gaps) - 1, min(len(gaps), 2000)).astype(int), gaps.argmax()
    )
    fractile, cum_score, cum_outcome = fractile[shown], cum_score[shown], cum_outcome[shown]
    ax_fractile.plot(fractile, cum_score, label="cumulative score", color="#1f77b4")
    ax_fractile.plot(fractile, cum_outcome, label="cumulative probability", color="#ff7f0e")
    ax_fractile.set_xlabel("fractile")
    ax_fractile.set_ylabel("cumulative sum / n")
    folds = len(fold_sizes or [1])
    how = f"\n(mean of {folds} folds; curves pooled)" if folds > 1 else ""
    ax_fractile.set_title(f"{title}: ks_error {ks:.4f}{how}", fontsize=9)
    ax_fractile.legend(fontsize=7, loc="upper left")
    ax_score.plot(cum_score, cum_score, color="#1f77b4")
    ax_score.plot(cum_score, cum_outcome, color="#ff7f0e")
    ax_score.set_xlabel("cumulative score")
    ax_score.set_ylabel("cumulative sum / n")
    ax_score.set_title(f"{title}: warped", fontsize=9)
    return ks


def ks_fold_mean(probs, y, mode="top", r=1, fold_sizes=None) -> float:
    """`ks_error` of each fold (``fold_sizes``: the rows are those folds' test rows one
    after another; None: one fold) and their mean: the number the tables print."""
    probs, y = np.asarray(probs), np.asarray(y)
    bounds = np.cumsum([0, *(fold_sizes or [len(y)])])
    return float(
        np.mean(
            [
                ks_error(probs[a:b], y[a:b], mode, r)
                for a, b in zip(bounds[:-1], bounds[1:], strict=True)
            ]
        )
    )


def ece_variance_scatter(ax, table, ece="confidence_ece", variance="confidence_variance"):
    """Hoki Fig. 3: log ECE against the variance of calibrated confidences, one point per
    (data set, method) row of ``table`` (columns ``dataset``, ``method``, ``ece``,
    ``variance``): a colour per method and, where there are several, a marker per data set,
    each with its legend, so that a point says which network it is."""
    from matplotlib.lines import Line2D

    markers = "osD^vP*Xh<>p8d"
    colours = colormaps["tab20"].colors
    methods = sorted(table["method"].unique())
    datasets = sorted(table["dataset"].unique()) if "dataset" in table else [""]
    by_data = len(datasets) > 1
    networks = table["dataset"] if by_data else pd.Series("", index=table.index)
    for (method, dataset), group in table.groupby([table["method"], networks]):
        i = methods.index(method)
        j = datasets.index(dataset) if by_data else i  # one data set: a marker per method
        ax.scatter(
            group[variance],
            np.log(group[ece]),
            s=22,
            marker=markers[j % len(markers)],
            color=colours[i % len(colours)],
            edgecolors="black",
            linewidths=0.3,
        )
    handles = [
        Line2D(
            [],
            [],
            ls="",
            marker="s" if by_data else markers[i % len(markers)],
            color=colours[i % len(colours)],
            markeredgecolor="black",
            markeredgewidth=0.3,
            label=m,
        )
        for i, m in enumerate(methods)
    ]
    if by_data:
        handles += [Line2D([], [], ls="", label="data sets:")]
        handles += [
            Line2D(
                [],
                [],
                ls="",
                marker=markers[j % len(markers)],
                color="#bbbbbb",
                markeredgecolor="black",
                markeredgewidth=0.3,
                label=d,
            )
            for j, d in enumerate(datasets)
        ]
    ax.legend(handles=handles, fontsize=6, ncol=2, loc="center left", bbox_to_anchor=(1.02, 0.5))
    ax.set_xlabel("variance of confidences")
    ax.set_ylabel(f"ln {ece}")
    # Variances are small numbers: long tick labels ran into each other at the default.
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.ticklabel_format(axis="x", style="sci", scilimits=(-2, 2))
    return ax
