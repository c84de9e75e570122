"""The metric_truth study's figure: each estimator's RMSE against its truth and its ordering
agreement, by test size (`calbench.studies.metric_truth_report` makes the numbers)."""

from __future__ import annotations

from calbench.plots.output import save_figure  # first: the headless backend  # isort: skip

import matplotlib.pyplot as plt

#: One colour per estimand, one line style per estimator within it.
_COLOURS = {"tce": "C0", "tce2": "C1", "cwce": "C2", "ks": "C3", "kuiper": "C4", "smooth": "C5"}
_STYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (1, 1)))


def _styles(estimands: dict) -> dict:
    seen: dict[str, int] = {}
    out = {}
    for name, estimand in estimands.items():
        out[name] = (_COLOURS[estimand], _STYLES[seen.get(estimand, 0) % len(_STYLES)])
        seen[estimand] = seen.get(estimand, 0) + 1
    return out


def metric_truth_figure(accuracy, ordering, estimands: dict, out_dir) -> list:
    """RMSE per number of classes (log-log) and the ordering agreement pooled over classes,
    against the test size; PNG and PDF under ``out_dir``. ``estimands``: estimator -> the
    population value it estimates (one colour each)."""
    classes = sorted(accuracy["classes"].unique())
    fig, axes = plt.subplots(1, len(classes) + 1, figsize=(4.2 * (len(classes) + 1), 4.2))
    styles = _styles(estimands)
    for ax, k in zip(axes, classes, strict=False):
        part = accuracy[accuracy["classes"] == k]
        for name, (colour, style) in styles.items():
            line = part[part["estimator"] == name].sort_values("rows")
            ax.plot(line["rows"], line["rmse"], color=colour, linestyle=style, marker=".")
        ax.set(xscale="log", yscale="log", xlabel="test rows", title=f"{k} classes")
        ax.set_ylabel("RMSE against the truth")
    weighted = ordering.assign(agreed=ordering["agreement"] * ordering["pairs"])
    pooled = weighted.groupby(["estimator", "rows"])[["agreed", "pairs"]].sum()
    share = (pooled["agreed"] / pooled["pairs"]).rename("share").reset_index()
    ax = axes[-1]
    for name, (colour, style) in styles.items():
        line = share[share["estimator"] == name].sort_values("rows")
        ax.plot(line["rows"], line["share"], color=colour, linestyle=style, marker=".", label=name)
    ax.set(xscale="log", xlabel="test rows", ylabel="pairs ordered as the truth orders them")
    ax.set_title("ordering agreement")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle("Calibration-error estimators against the known truth (metric_truth)")
    fig.tight_layout()
    return save_figure(fig, out_dir, "metric_truth")
