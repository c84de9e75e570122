"""The body of ``calbench run``: one configured cell, skipped if stored, else run and stored."""

from __future__ import annotations

import yaml
from tabulate import tabulate

from calbench.calibrators.bounds import bound_hint
from calbench.calibrators.methods import bounded_variant
from calbench.decision.family import CURVE_METRIC
from calbench.metrics.scoring import REFUTED_BELOW, REFUTED_MARK
from calbench.runner.cell import evaluate_cell, summarise
from calbench.runner.plan import CellPlan
from calbench.runner.predictions import check_storage
from calbench.runner.store import ResultStore


def found_stored(plan: CellPlan) -> bool:
    """Whether `run_job` will skip the cell: stored, and ``force`` not set."""
    run = plan.spec.run
    return ResultStore(run["results_dir"]).has(plan.hash) and not run["force"]


def run_job(plan: CellPlan) -> str:
    """Run (or skip) the planned cell; returns its config hash."""
    run, cell_hash, label = plan.spec.run, plan.hash, plan.label
    if found_stored(plan):
        print(f"[done] {label}: already in the store ({cell_hash}); force=true recomputes it.")
        return cell_hash
    store = ResultStore(run["results_dir"])
    storage = run["predictions"]
    check_storage(storage)  # before the work, not after
    rows, predictions = evaluate_cell(plan)
    rows["config_hash"] = cell_hash
    path = store.write(
        cell_hash,
        rows,
        yaml.safe_dump(plan.cell, sort_keys=False),
        predictions=None if storage == "none" else (predictions, storage),
    )
    # A risk curve's points go to the store and `calbench tables`, not to the terminal.
    curve = rows["metric"].str.startswith(CURVE_METRIC)
    summary = summarise(rows[~curve])
    fit = rows.groupby("fold")["fit_seconds"].first().sum()
    print(
        f"\n{label} | criterion={rows['criterion'].iat[0]} | protocol={plan.protocol.name}"
        f" | fit {fit:.2f} s"
    )
    folds = int(summary["folds"].max())
    if folds > 1:
        table = [[m, f"{r['mean']:.4f}", f"{r['std']:.4f}"] for m, r in summary.iterrows()]
        headers = ["metric", "mean", f"std ({folds} folds)"]
    else:
        table = [[m, f"{r['mean']:.4f}"] for m, r in summary.iterrows()]
        headers = ["metric", "value"]
    print(tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True))
    if curve.any():
        print(f"risk curve: {rows.loc[curve, 'metric'].nunique()} eps points ({CURVE_METRIC}...)")
    left_out = rows.loc[rows["metric"] == "inner_classes_missing", "value"]
    if left_out.sum() > 0:
        print(
            f"note: in {int((left_out > 0).sum())} fold(s) the inner CV left a class out of "
            f"{int(left_out.sum())} inner training part(s) in all (row inner_classes_missing):"
            " those grid points were rated by calibrators that never saw the class; "
            "protocol.inner_cv=stratified or fewer protocol.inner_folds avoid it."
        )
    wrong = rows.loc[rows["metric"] == "wrong_certainties", "value"].sum()
    if wrong > 0:
        print(
            f"note: {int(wrong)} test row(s) gave their label a probability below "
            f"{REFUTED_BELOW:g} (row wrong_certainties): certainties the data refuted, which "
            f"dominate the log-loss; tables mark this cell with {REFUTED_MARK}. "
            + bound_hint(plan.template, bounded_variant(plan.spec.method))
        )
    print(f"rows: {path}")
    return cell_hash
