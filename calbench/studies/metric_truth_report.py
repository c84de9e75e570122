"""The metric_truth study's tables and figure (`calbench.studies.metric_truth` makes the rows).

- **Accuracy**: per estimator, number of classes and test size, the bias (mean of estimate
  minus truth), the standard deviation over test sets (within a task and calibrator,
  pooled) and the RMSE, over every task and calibrator.
- **Coverage**: the share of test sets whose 95% interval holds the truth; an interval below
  `UNDERCOVER` is marked.
- **Ordering**: of the pairs of calibrators on one test set whose truths differ by at least
  `TIE`, the share the estimator orders as the truth does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.markup import markdown_table
from calbench.studies.metric_truth import ESTIMATORS, INTERVAL_METHODS

#: Coverage below this (of a nominal 95%) is marked as undercoverage.
UNDERCOVER = 0.90
#: Pairs whose truths differ by less than this are ties no estimator is asked to order
#: (ten times the population values' own sampling error, about 1e-4).
TIE = 1e-3
TASK = ["classes", "model", "calibrator"]
#: The population values in words.
ESTIMANDS = {
    "tce": "top-label L1",
    "tce2": "top-label L2",
    "cwce": "classwise L1",
    "ks": "KS",
    "kuiper": "Kuiper",
    "smooth": "smooth ECE",
}


def accuracy(rows: pd.DataFrame) -> pd.DataFrame:
    """Bias, pooled standard deviation and RMSE per (estimator, classes, rows)."""
    error = rows.assign(error=rows["estimate"] - rows["truth"])
    by = ["estimator", "classes", "rows"]
    within = error.groupby([*by, "model", "calibrator"])["estimate"].var(ddof=1)
    out = error.groupby(by)["error"].agg(bias="mean", rmse=lambda e: float(np.sqrt(np.mean(e**2))))
    out["sd"] = np.sqrt(within.groupby(level=by).mean())
    return out[["bias", "sd", "rmse"]].reset_index()


def coverage(rows: pd.DataFrame) -> pd.DataFrame:
    """Share of test sets whose interval holds the truth, per (estimator, classes, rows,
    interval method); NaN where the method draws no interval for the estimator."""
    parts = []
    for method in INTERVAL_METHODS:
        low, high = rows[f"{method}_low"], rows[f"{method}_high"]
        held = ((low <= rows["truth"]) & (rows["truth"] <= high)).astype(float)
        held[low.isna()] = np.nan
        part = rows.assign(held=held).groupby(["estimator", "classes", "rows"])["held"].mean()
        parts.append(part.rename(method))
    out = pd.concat(parts, axis=1)
    return out.dropna(how="all").reset_index()


def ordering(rows: pd.DataFrame) -> pd.DataFrame:
    """Share of calibrator pairs ordered as the truth orders them, per (estimator, classes,
    rows); ``pairs``: how many pairs were asked."""
    key = ["estimator", "classes", "model", "rows", "draw"]
    wide = rows.pivot_table(index=key, columns="calibrator", values=["estimate", "truth"])
    methods = list(wide["estimate"].columns)
    agree, asked = [], []
    for i, a in enumerate(methods):
        for b in methods[i + 1 :]:
            truth = wide["truth"][a] - wide["truth"][b]
            sign = np.sign(wide["estimate"][a] - wide["estimate"][b]) == np.sign(truth)
            valid = truth.abs() >= TIE
            agree.append(sign & valid)
            asked.append(valid)
    agreed = sum(a.astype(int) for a in agree).groupby(level=[0, 1, 3]).sum()
    pairs = sum(v.astype(int) for v in asked).groupby(level=[0, 1, 3]).sum()
    out = pd.DataFrame({"agreement": agreed / pairs.replace(0, np.nan), "pairs": pairs})
    return out.reset_index()


def _estimand(name: str) -> str:
    return ESTIMATORS[name][1]


def accuracy_markdown(table: pd.DataFrame, classes: int) -> str:
    """One number of classes: RMSE (bias) per estimator and test size, the lowest RMSE of
    each estimand's estimators in bold."""
    part = table[table["classes"] == classes]
    sizes = sorted(part["rows"].unique())
    lines = []
    for name in ESTIMATORS:
        row = part[part["estimator"] == name].set_index("rows")
        cells = []
        for n in sizes:
            rmse, bias = row.at[n, "rmse"], row.at[n, "bias"]
            rival = part[(part["rows"] == n) & part["estimator"].map(_estimand).eq(_estimand(name))]
            text = f"{rmse:.4f} ({bias:+.4f})"
            cells.append(f"**{text}**" if rmse == rival["rmse"].min() else text)
        lines.append([name, _estimand(name), *cells])
    frame = pd.DataFrame(lines, columns=["estimator", "truth", *[f"{n:,} rows" for n in sizes]])
    # Every cell is the study's own text (estimator names, numbers): bold passes as it is.
    return frame.set_index("estimator").to_markdown()


def coverage_markdown(table: pd.DataFrame) -> str:
    """Coverage per estimator and test size, pooled over classes; ▼ below `UNDERCOVER`."""
    pooled = table.groupby(["estimator", "rows"])[list(INTERVAL_METHODS)].mean()
    frame = pooled.unstack("rows")
    out = pd.DataFrame(index=frame.index)
    for method, n in frame.columns:
        out[f"{method}, {n:,} rows"] = frame[(method, n)].map(
            lambda v: "" if np.isnan(v) else f"{v:.2f} ▼" if v < UNDERCOVER else f"{v:.2f}"
        )
    return markdown_table(out)


def ordering_markdown(table: pd.DataFrame) -> str:
    """Ordering agreement per estimator and test size, pooled over classes (weighted by
    the pairs asked)."""
    weighted = table.assign(agreed=table["agreement"] * table["pairs"])
    pooled = weighted.groupby(["estimator", "rows"])[["agreed", "pairs"]].sum()
    share = (pooled["agreed"] / pooled["pairs"]).unstack("rows")
    share = share.loc[[name for name in ESTIMATORS if name in share.index]]
    share.columns = [f"{n:,} rows" for n in share.columns]
    return markdown_table(share.map(lambda v: f"{v:.3f}"))


def headline(acc: pd.DataFrame, cov: pd.DataFrame, order: pd.DataFrame) -> list[str]:
    """The findings a reader needs first: per test size and truth with several estimators,
    the estimators nearest to and farthest from it (RMSE over tasks, pooled over classes),
    the intervals that undercover, and ECE-15's ordering agreement at 1,000 rows."""
    lines = []
    pooled = acc.groupby(["estimator", "rows"])["rmse"].mean().unstack("rows")
    rivals = {}  # estimand -> its estimators (RMSEs compare only against one truth)
    for name, (_, estimand) in ESTIMATORS.items():
        rivals.setdefault(estimand, []).append(name)
    for n in pooled.columns:
        parts = []
        for estimand, names in rivals.items():
            if len(names) > 1:
                ranked = pooled.loc[names, n].sort_values()
                parts.append(
                    f"{ESTIMANDS[estimand]}: {ranked.index[0]} {ranked.iloc[0]:.4f}, "
                    f"{ranked.index[-1]} {ranked.iloc[-1]:.4f}"
                )
        lines.append(f"- {n:,} test rows, RMSE best and worst of each truth: " + "; ".join(parts))
    pooled_cov = cov.groupby(["estimator", "rows"])[list(INTERVAL_METHODS)].mean()
    under = pooled_cov[pooled_cov.min(axis=1) < UNDERCOVER]
    if len(under):
        worst = pooled_cov.stack().idxmin()
        lines.append(
            f"- {len(under)} of {len(pooled_cov)} (estimator, size) intervals cover the truth "
            f"less than {UNDERCOVER:.0%} of the time; the worst, {worst[2]} on {worst[0]} at "
            f"{worst[1]:,} rows, {pooled_cov.loc[worst[:2], worst[2]]:.2f}: a bootstrap "
            "interval is the spread of the estimate, not an interval for the truth, and a "
            "biased estimator's misses it."
        )
    sun = pooled_cov["sun"].dropna()
    if len(sun):
        shares = ", ".join(f"{v:.0%} on {n:,} rows" for (_, n), v in sun.items())
        lines.append(
            f"- Sun et al.'s 95% interval for the L2-ECE (l2_ece_sun) holds the top-label L2 "
            f"truth on {shares}; it is an interval for the 15-bin error, which lies below "
            "the truth where the gap varies within a bin."
        )
    at = order[(order["estimator"] == "ece_15_width") & (order["rows"] == 1_000)]
    if len(at) and at["pairs"].sum():
        share = (at["agreement"] * at["pairs"]).sum() / at["pairs"].sum()
        lines.append(
            f"- ECE-15 (equal width) orders {share:.1%} of {int(at['pairs'].sum())} calibrator "
            "pairs as the truth does on 1,000 test rows."
        )
    return lines


def write_study(rows: pd.DataFrame, out_dir, command: str) -> list:
    """``metric_truth.md`` (the three tables and the findings), the summaries as CSV and the
    figure, under ``out_dir``; the paths written."""
    from pathlib import Path

    from calbench.atomic import atomic_write_text
    from calbench.plots.metric_truth import metric_truth_figure

    out = Path(out_dir)
    acc, cov, order = accuracy(rows), coverage(rows), ordering(rows)
    test_sets = len(rows.drop_duplicates(["classes", "model", "rows", "draw"]))
    parts = [
        "# Which calibration number to trust (metric_truth)",
        "",
        f"`{command}`: {len(rows):,} estimates on {test_sets:,} test sets. Truths are "
        "population values on a large sample of each task (`calbench.studies.truth_tasks`).",
        "",
        "## Findings",
        "",
        *headline(acc, cov, order),
        "",
    ]
    for k in sorted(acc["classes"].unique()):
        parts += [
            f"## RMSE (bias) against the truth, {k} classes",
            "",
            accuracy_markdown(acc, k),
            "",
        ]
    parts += [
        "## Coverage of 95% intervals: calbench's bootstrap, and Sun et al.'s (▼ below 90%)",
        "",
        coverage_markdown(cov),
        "",
        f"## Calibrator pairs ordered as the truth orders them (truths {TIE:g} or more apart)",
        "",
        ordering_markdown(order),
        "",
    ]
    written = [
        out / "metric_truth.md",
        out / "accuracy.csv",
        out / "coverage.csv",
        out / "ordering.csv",
    ]
    atomic_write_text(written[0], "\n".join(parts))
    for frame, path in zip((acc, cov, order), written[1:], strict=True):
        atomic_write_text(path, frame.to_csv(index=False))
    estimands = {name: estimand for name, (_, estimand) in ESTIMATORS.items()}
    return written + metric_truth_figure(acc, order, estimands, out)
