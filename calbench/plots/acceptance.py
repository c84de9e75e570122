"""How often a calibration test accepted the predictions (Kull Fig. 3b and 3c).

A ``p_*`` metric (``p_cw_ece``, ``p_conf_ece``) is 1 on a fold where the consistency-
resampling test did not reject calibration, so its mean over a task's folds is the share
of folds judged calibrated. One box per group (a calibrator, or a classifier before
calibration) shows that share across tasks; the diamond and the label give its mean.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def acceptance_shares(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per task (data set, classifier) and method: the mean of ``metric`` over its folds."""
    wanted = rows[rows["metric"] == metric]
    return wanted.groupby(["dataset", "classifier", "method"])["value"].mean().reset_index()


def acceptance_boxes(ax, shares: pd.DataFrame, by: str, title: str, order=None) -> None:
    """``shares``: one row per task with columns ``by`` and ``value`` (share in [0, 1])."""
    groups = order or sorted(shares[by].unique())
    data = [shares.loc[shares[by] == g, "value"].to_numpy() for g in groups]
    positions = np.arange(1, len(groups) + 1)
    ax.boxplot(data, positions=positions, widths=0.6, showfliers=False)
    means = [d.mean() for d in data]
    ax.scatter(positions, means, marker="D", color="tab:red", zorder=3, label="mean")
    for x, m in zip(positions, means, strict=True):
        ax.text(x, 1.03, f"{m:.2f}", ha="center", fontsize=7, color="tab:red")
    ax.set_xticks(positions, groups, rotation=45, ha="right", fontsize=8)
    ax.set_ylim(-0.03, 1.1)
    ax.set_ylabel("share of folds judged calibrated")
    ax.set_title(title, fontsize=9, pad=14)
    ax.legend(loc="lower right", fontsize=7)
