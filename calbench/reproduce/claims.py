"""``calbench claims EXPERIMENT``: the papers' headline claims (each paper pack's
``claims.yaml``, `shipped_claims`) checked on
every task of an experiment (each network, or data set / classifier).

A claim says that ``method`` is better on ``metric`` than every method of ``than``. On a
task, its **lead** is how much better the method is than the best of the others (the best
other's value minus the method's, for a loss; the sign turned for a score, so a positive
lead always favours the claim). Its interval is the percentile interval of the same
difference over the paired bootstrap of the task's test points (every method resampled
alike, the best of the others taken per resample, which only makes a claim against many
methods harder to confirm): *holds* where the interval lies above 0, *fails* where it lies
below, *undecided* where it holds 0; *not run* where a named method has no value there.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np
import pandas as pd

from calbench.errors import CalbenchError
from calbench.markup import markdown_table, md_text
from calbench.metrics import higher_is_better
from calbench.packs import pack_entries
from calbench.results.experiment import Results
from calbench.stats.bootstrap import BootstrapSettings
from calbench.tables.intervals import Replicates
from calbench.tables.leaderboard import task_values

VERDICTS = ("holds", "fails", "undecided", "not run")


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    table: str
    claim: str
    metric: str
    method: str
    than: tuple | str
    tasks: str = "*"


def shipped_claims() -> list[Claim]:
    """Every paper pack's ``claims.yaml``: each entry an ``id``, the ``paper`` and ``table``
    it comes from, the ``claim`` in words, and what checks it: ``method`` is better on
    ``metric`` than every method of ``than`` (a list, or ``all``: every other method stored
    for the task) on the tasks whose name matches ``tasks`` (a glob; default every task).
    Each claim's metric is its paper's definition (``conf/metrics/real_networks.yaml``): an
    experiment that did not record it checks none of its tasks for that claim."""
    claims = []
    for _, entry in pack_entries("claims.yaml"):
        entry = dict(entry)
        than = entry.pop("than")
        claims.append(Claim(**entry, than=than if than == "all" else tuple(than)))
    return claims


def lead_and_verdict(own: float, others, own_reps, others_reps, better: bool, alpha: float):
    """(lead, low, high, verdict) of one method's ``own`` value against ``others`` (values),
    with their bootstrap replicates (``others_reps``: shape (methods, B))."""
    if better:
        lead = own - float(np.max(others))
        replicates = own_reps - np.max(others_reps, axis=0)
    else:
        lead = float(np.min(others)) - own
        replicates = np.min(others_reps, axis=0) - own_reps
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2])
    verdict = "holds" if low > 0 else "fails" if high < 0 else "undecided"
    return lead, float(low), float(high), verdict


def check_claims(
    results_dir, experiment: str, claims=None, settings: BootstrapSettings | None = None
) -> pd.DataFrame:
    """One row per (claim, task): lead, interval and verdict (see the module docstring)."""
    settings = settings or BootstrapSettings()
    store = Results.of(results_dir)
    rows = store.experiment_rows(experiment)
    checksums = dict(zip(rows["config_hash"], rows["predictions_sha256"], strict=True))
    draws = Replicates(store, checksums, settings)
    stored_metrics = set(rows["metric"])
    out = []
    for claim in claims or shipped_claims():
        if claim.metric not in stored_metrics:
            continue  # this experiment did not record the claim's metric
        values, cells = task_values(rows, claim.metric)
        for task in values.index:
            if not fnmatch.fnmatch(task, claim.tasks):
                continue
            row = values.loc[task].dropna()
            out.append(_task_verdict(claim, task, row, cells, draws, settings.alpha))
    if not out:
        raise CalbenchError(
            f"No claim applies to {experiment}: its stored metrics ({sorted(stored_metrics)}) "
            "hold none of the claims' metrics, or no task matches."
        )
    return pd.DataFrame(out)


def _task_verdict(claim, task: str, row: pd.Series, cells, draws: Replicates, alpha) -> dict:
    """One claim on one task: its method's lead over the others (``row``: method -> value)
    with the interval of the lead and the verdict, or "not run" naming the methods the
    task lacks."""
    if claim.than == "all":
        others = [m for m in row.index if m != claim.method]
    else:
        others = list(claim.than)
    record = {
        "claim": claim.id,
        "statement": f"{claim.claim} ({claim.paper}, {claim.table}; {claim.metric})",
        "task": task,
    }
    missing = [m for m in [claim.method, *others] if m not in row.index]
    if missing or not others:
        return {**record, "verdict": "not run", "missing": ",".join(missing)}
    reps = {
        m: draws.of((claim.metric, cells.loc[task, m], 1.0))[1] for m in [claim.method, *others]
    }
    better = higher_is_better(claim.metric)
    lead, low, high, verdict = lead_and_verdict(
        row[claim.method],
        row[others].to_numpy(),
        reps[claim.method],
        np.stack([reps[m] for m in others]),
        better,
        alpha,
    )
    best_other = row[others].idxmax() if better else row[others].idxmin()
    return {
        **record,
        "verdict": verdict,
        "lead": lead,
        "low": low,
        "high": high,
        "method_value": row[claim.method],
        "best_other": best_other,
        "best_other_value": row[best_other],
    }


def summary(checked: pd.DataFrame) -> pd.DataFrame:
    """Per claim: its statement and how many tasks it holds, fails, is undecided or not run
    on, in the order the claims were checked."""
    counts = checked.groupby(["claim", "verdict"]).size().unstack("verdict", fill_value=0)
    counts = counts.reindex(index=checked["claim"].unique(), columns=list(VERDICTS), fill_value=0)
    statements = checked.drop_duplicates("claim").set_index("claim")["statement"]
    counts.insert(0, "statement", statements.reindex(counts.index))
    return counts


def to_markdown(experiment: str, checked: pd.DataFrame, settings: BootstrapSettings) -> str:
    level = f"{100 * (1 - settings.alpha):g}%"
    lines = [
        f"## The papers' claims on {md_text(experiment)}",
        "",
        f"Per claim, the tasks where it holds, fails or is undecided: the method's lead over the "
        f"best of the others it is claimed to beat, with the {level} interval of the paired "
        f"bootstrap of the task's test points (B = {settings.resamples}, seed {settings.seed}); "
        "holds where the interval lies above 0, fails where it lies below.",
        "",
        markdown_table(summary(checked)),
        "",
    ]
    for claim, part in checked.groupby("claim", sort=False):
        lines += [
            f"**{md_text(claim)}**",
            "",
            "| task | verdict | lead [interval] | its value | best other, its value |",
            "|---|---|---|---|---|",
        ]
        for _, r in part.iterrows():
            task = md_text(r["task"])
            if r["verdict"] == "not run":
                lines.append(f"| {task} | not run | missing: {md_text(r['missing'])} | | |")
                continue
            lines.append(
                f"| {task} | {r['verdict']} | {r['lead']:+.4f} [{r['low']:+.4f}, "
                f"{r['high']:+.4f}] | {r['method_value']:.4f} | {md_text(r['best_other'])} "
                f"{r['best_other_value']:.4f} |"
            )
        lines.append("")
    return "\n".join(lines)
