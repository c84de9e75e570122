"""The body of ``calbench run``: one configured cell, skipped if stored, else run and stored."""

from __future__ import annotations

import numpy as np
from tabulate import tabulate

from calbench.atomic import writable
from calbench.calibrators.bounds import bound_hint
from calbench.calibrators.methods import bounded_variant
from calbench.data.identity import user_files_name
from calbench.decision.family import CURVE_METRIC
from calbench.metrics.scoring import REFUTED_BELOW, REFUTED_MARK, UNCONVERGED_MARK
from calbench.results.locks import cell_lock
from calbench.results.predictions import check_storage
from calbench.results.store import ResultStore
from calbench.runner.cell import evaluate_cell
from calbench.runner.grid import edge_choices
from calbench.runner.plan import CellPlan
from calbench.runner.progress import running
from calbench.yaml_text import dump_yaml


def found_stored(plan: CellPlan) -> bool:
    """Whether `run_job` will skip the cell: stored, and ``force`` not set."""
    run = plan.spec.run
    return ResultStore(run["results_dir"]).has(plan.hash) and not run["force"]


# Each line flushed as it is printed: a sweep's worker processes share the terminal, and a
# line left in a buffer came out joined to another's ("...store.[done] ...").


def run_job(plan: CellPlan) -> str:
    """Run (or skip) the planned cell, under its lock (`calbench.results.locks`); returns
    its config hash."""
    run, cell_hash, label = plan.spec.run, plan.hash, plan.label
    if found_stored(plan):
        print(
            f"[done] {label}: already in the store ({cell_hash}); force=true recomputes it.",
            flush=True,
        )
        return cell_hash
    check_storage(run["predictions"])  # before the work, not after
    stored = _compute_and_store(plan, ResultStore(run["results_dir"]))
    if stored is not None:
        _report(plan, *stored)
    return cell_hash


def _compute_and_store(plan: CellPlan, store: ResultStore):
    """(rows, path) of the cell computed and stored under its lock; None where another run
    stored it meanwhile. Damaged rows found there are moved aside first."""
    run, cell_hash, label = plan.spec.run, plan.hash, plan.label
    storage = run["predictions"]
    with cell_lock(store.root, cell_hash, label):
        problem = store.damage(cell_hash)  # one read: stored meanwhile, damaged, or absent
        if problem is None and store.has_file(cell_hash) and not run["force"]:
            print(f"[done] {label}: stored meanwhile by another run ({cell_hash}).", flush=True)
            return None
        if problem:
            with writable(store.root):
                folder = store.quarantine(cell_hash)
            print(
                f"[damaged] {label}: its stored rows ({problem}) moved to {folder}; recomputing.",
                flush=True,
            )
        if plan.data is not None and all(f["sha256"] for f in plan.data["files"]):
            with writable(store.root):
                store.claim_data_name(
                    plan.spec.experiment, user_files_name(plan.spec.dataset), plan.data
                )
        with running(label):  # a long grid search names the cell in its progress lines
            rows, predictions = evaluate_cell(plan)
        config = plan.cell if plan.data is None else {**plan.cell, "data": plan.data}
        config = {**config, "shape": rows.attrs.get("shape", {})}
        with writable(store.root):
            # Claimed as it is stored: a data set that fails to load leaves no store behind.
            store.claim_method_name(
                plan.spec.experiment, plan.method, str(plan.spec.method["calibrator"])
            )
            path = store.write(
                cell_hash,
                rows,
                dump_yaml(config),
                predictions=None if storage == "none" else (predictions, storage),
            )
    return rows, path


def _report(plan: CellPlan, rows, path) -> None:
    """The stored cell on the terminal: one line (its metrics with ``verbose``), then a
    note for each thing in its rows a reader should know."""
    run, label = plan.spec.run, plan.label
    # A risk curve's points go to the store and `calbench tables`, not to the terminal.
    summary, curve_points = summarise(rows)
    fit_per_fold = zip(rows["fold"].tolist(), rows["fit_seconds"].tolist(), strict=True)
    fit = sum(dict(fit_per_fold).values())
    if run.get("verbose"):
        _print_metrics(label, rows, plan.protocol.name, summary, fit)
    else:  # one line a cell: a sweep's cells stay readable side by side
        shown = [f"{m} {np.mean(summary[m]):.4f}" for m in HEADLINE if m in summary]
        print(f"[stored] {label} | {' | '.join(shown)} | fit {fit:.2f} s", flush=True)
    if curve_points:
        print(f"risk curve: {curve_points} eps points ({CURVE_METRIC}...)")
    for note in _notes(plan, summary, rows):
        print(note)
    if run.get("verbose"):
        print(f"rows: {path}")


def _notes(plan: CellPlan, summary: dict, rows) -> list[str]:
    """Notes on what the cell's rows show: classes left out by the inner CV, certainties
    the data refuted, fits that stopped short, and choices at the grid's edge."""
    notes = []
    left_out = summary.get("inner_classes_missing", [])
    if sum(left_out) > 0:
        notes.append(
            f"note: in {sum(v > 0 for v in left_out)} fold(s) the inner CV left a class out of "
            f"{int(sum(left_out))} inner training part(s) in all (row inner_classes_missing):"
            " those grid points were rated by calibrators that never saw the class; "
            "protocol.inner_cv=stratified or fewer protocol.inner_folds avoid it."
        )
    wrong = sum(summary.get("wrong_certainties", []))
    if wrong > 0:
        notes.append(
            f"note: {int(wrong)} test row(s) gave their label a probability below "
            f"{REFUTED_BELOW:g} (row wrong_certainties): certainties the data refuted, which "
            f"dominate the log-loss; tables mark this cell with {REFUTED_MARK}. "
            + bound_hint(plan.template, bounded_variant(plan.spec.method))
        )
    short = summary.get("fit_unconverged", [])
    if short:
        notes.append(
            f"note: the fit stopped before converging in {len(short)} fold(s) (row "
            f"fit_unconverged; the warning above says how): not the method's optimum, so "
            f"tables mark this cell with {UNCONVERGED_MARK}."
        )
    edge_note = grid_edge_note(plan.grid, rows, plan.protocol.widen_edges)
    return [*notes, edge_note] if edge_note else notes


def grid_edge_note(grid: dict, rows, widened: int = 0) -> str:
    """A note where inner CV chose a numeric grid key at the same edge of its values on
    most folds: the grid may stop short of the best value (empty otherwise, and where the
    protocol widened the grid: its choices then lie beyond the grid as given)."""
    import json

    folds = dict(zip(rows["fold"].tolist(), rows["params"].tolist(), strict=True))
    chosen = [json.loads(p) for p in folds.values() if isinstance(p, str) and p.startswith("{")]
    if not chosen or not grid or widened:
        return ""
    sides: dict[tuple, int] = {}
    for params in chosen:
        for key, side in edge_choices(grid, params).items():
            sides[(key, side, params[key])] = sides.get((key, side, params[key]), 0) + 1
    at_edge = [(k, s, v, n) for (k, s, v), n in sides.items() if n > len(chosen) / 2]
    if not at_edge:
        return ""
    said = "; ".join(
        f"{k} at the {s} value of its grid ({v:g}) on {n} of {len(chosen)} fold(s)"
        for k, s, v, n in at_edge
    )
    return (
        f"note: inner CV chose {said}; the grid may stop short of the best value: "
        "+protocol.widen_edges=2 searches beyond it."
    )


def summarise(rows) -> tuple[dict[str, list[float]], int]:
    """(each metric's values over the folds, in the rows' order; the number of risk-curve
    points, which are not summarised). Plain lists: pandas' groupby cost a sweep's cell
    a few milliseconds (`benchmarks.bench_sweep`)."""
    summary: dict[str, list[float]] = {}
    curve = set()
    for metric, value in zip(rows["metric"].tolist(), rows["value"].tolist(), strict=True):
        if metric.startswith(CURVE_METRIC):
            curve.add(metric)
        else:
            summary.setdefault(metric, []).append(value)
    return summary, len(curve)


#: The metrics a cell's one line shows (``verbose=true`` shows every one, per fold).
HEADLINE = ("log_loss", "brier", "accuracy", "classwise_ece")


def _print_metrics(label: str, rows, protocol: str, summary: dict, fit: float) -> None:
    """Every metric of a cell: its value, or mean and spread over the folds."""
    print(
        f"\n{label} | criterion={rows['criterion'].iat[0]} | protocol={protocol} | fit {fit:.2f} s"
    )
    folds = max(len(values) for values in summary.values())
    if folds > 1:
        table = [[m, f"{np.mean(v):.4f}", f"{np.std(v, ddof=1):.4f}"] for m, v in summary.items()]
        headers = ["metric", "mean", f"std ({folds} folds)"]
    else:
        table = [[m, f"{np.mean(v):.4f}"] for m, v in summary.items()]
        headers = ["metric", "value"]
    print(tabulate(table, headers=headers, tablefmt="simple", disable_numparse=True))
