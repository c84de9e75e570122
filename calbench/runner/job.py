"""The body of ``calbench run``: one configured cell, skipped if stored, else run and stored."""

from __future__ import annotations

import yaml
from omegaconf import DictConfig
from tabulate import tabulate

from calbench.decision.family import CURVE_METRIC
from calbench.hashing import config_hash
from calbench.runner.build import cell_config
from calbench.runner.cell import evaluate_cell, summarise
from calbench.runner.predictions import check_storage
from calbench.runner.spec import CellSpec
from calbench.runner.store import ResultStore


def run_job(cfg: CellSpec | DictConfig) -> str:
    """Run (or skip) the cell ``cfg`` describes; returns its config hash."""
    spec = CellSpec.of(cfg)
    cell = cell_config(spec)
    cell_hash = config_hash(cell)
    store = ResultStore(spec.run["results_dir"])
    data = spec.dataset["name"] or spec.dataset["loader"]
    label = f"{spec.experiment} | {data} | {spec.method['name']}"
    if store.has(cell_hash) and not spec.run.get("force", False):
        print(f"[done] {label}: already in the store ({cell_hash}); force=true recomputes it.")
        return cell_hash
    storage = spec.run.get("predictions", "auto")
    check_storage(storage)  # before the work, not after
    rows, predictions = evaluate_cell(spec)
    rows["config_hash"] = cell_hash
    path = store.write(
        cell_hash,
        rows,
        yaml.safe_dump(cell, sort_keys=False),
        predictions=None if storage == "none" else (predictions, storage),
    )
    # A risk curve's points go to the store and `calbench tables`, not to the terminal.
    curve = rows["metric"].str.startswith(CURVE_METRIC)
    summary = summarise(rows[~curve])
    fit = rows.groupby("fold")["fit_seconds"].first().sum()
    print(
        f"\n{label} | criterion={rows['criterion'].iat[0]} | protocol={spec.protocol['name']}"
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
    print(f"rows: {path}")
    return cell_hash
