"""``calbench store verify``: every file of a results store checked, and ``--repair``.

A store holds, per cell, its rows (``<hash>.csv``, sealed by `calbench.results.integrity`),
its config (``<hash>.yaml``) and its predictions (``<hash>.npz``, whose SHA-256 the rows
name), and the arrays that cells share (``arrays/<content hash>.npz``, named by their
content). `verify` lists what is wrong with any of them; `repair` moves each damaged cell
(all its files) to ``store/damaged/``, where nothing reads it and from where the next
``calbench run`` of its sweep computes it again, moves damaged shared arrays there too
(with the cells that name them), and removes temporary files that killed writers left.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from calbench.errors import CalbenchError
from calbench.results import predictions as fold_predictions
from calbench.results.integrity import SEAL, config_damage, config_mismatch
from calbench.results.locks import cell_lock
from calbench.results.names import DataNames, MethodNames
from calbench.results.reading import is_stray
from calbench.results.store import DamagedCells, ResultStore

#: A temporary file older than this is a killed writer's (a write takes seconds).
LEFTOVER_AGE_SECONDS = 600


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a store: the file, what is wrong, and the cell it breaks (None
    for a shared file or a leftover)."""

    path: Path
    reason: str
    cell: str | None = None


def verify(results_dir) -> tuple[list[Problem], dict[str, int]]:
    """Every problem of the store under ``results_dir``, and counts of what was checked."""
    store = ResultStore(results_dir)
    root = store.root
    if not root.is_dir():
        raise CalbenchError(f"No results store at {root}; `calbench run` makes one.")
    problems: list[Problem] = []
    counts = {"cells": 0, "unsealed": 0, "shared arrays": 0}
    for path in sorted(root.glob("*.csv")):
        if is_stray(path, path.read_bytes()):
            problems.append(Problem(path, "no cell's rows (no config_hash column): a stray file"))
            continue
        counts["cells"] += 1
        problems += _cell_problems(store, path.stem)
        with open(path, "rb") as f:
            counts["unsealed"] += not f.readline().rstrip(b"\n").endswith(SEAL.encode())
    for path in sorted((root / "arrays").glob("*.npz")):
        counts["shared arrays"] += 1
        try:
            fold_predictions.check_shared(path)
        except CalbenchError as exc:
            problems.append(Problem(path, str(exc).split(";")[0]))
    problems += [
        Problem(
            path,
            "no rows beside it (a cell's rows removed, or a run killed before "
            "it stored them): a leftover",
        )
        for suffix in ("yaml", "npz")
        for path in sorted(root.glob(f"*.{suffix}"))
        if not path.with_suffix(".csv").exists()
    ]
    problems += _name_index_problems(store)
    problems += [
        Problem(path, "a killed writer's temporary file")
        for path in sorted(root.rglob(".*.tmp"))
        if time.time() - path.stat().st_mtime > LEFTOVER_AGE_SECONDS
    ]
    return problems, counts


def _cell_problems(store: ResultStore, cell_hash: str) -> list[Problem]:
    try:
        cell = store.cell(cell_hash)  # its rows, checked
    except DamagedCells as damaged:
        return [Problem(path, why, cell_hash) for path, why in damaged.problems.items()]
    config = store.root / f"{cell_hash}.yaml"
    try:
        data = config.read_bytes()
        problem = config_mismatch(data, cell["config_sha256"].iat[0]) or config_damage(data)
    except FileNotFoundError:
        # calbench writes every cell's config beside its sealed rows; a cell an earlier
        # calbench stored (unsealed rows) may have none.
        problem = "its config is missing (removed?)" if _sealed(store, cell_hash) else None
    if problem:
        return [Problem(config, problem, cell_hash)]
    sha256 = cell["predictions_sha256"].iat[0]
    if sha256:
        try:
            store.predictions(cell_hash, sha256)
        except CalbenchError as exc:
            return [Problem(store.root / f"{cell_hash}.npz", str(exc).split(";")[0], cell_hash)]
    return []


def _sealed(store: ResultStore, cell_hash: str) -> bool:
    with open(store.root / f"{cell_hash}.csv", "rb") as f:
        return f.readline().rstrip(b"\n").endswith(SEAL.encode())


def _name_index_problems(store: ResultStore) -> list[Problem]:
    """The name indexes (`calbench.results.names`): damaged, or missing lines of cells
    they should name (the file removed or cut at a line end)."""
    problems, configs = [], store.configs()
    for index, what in ((DataNames(store.root), "data set"), (MethodNames(store.root), "method")):
        problem = index.damage()
        if problem:
            problems.append(Problem(index.path, problem))
            continue
        missing = index.missing(configs)
        if missing:
            problems.append(
                Problem(
                    index.path,
                    f"it lacks the {what} names of {len(missing)} cell(s) "
                    f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})",
                )
            )
    return problems


def repair(results_dir, problems: list[Problem]) -> list[str]:
    """Act on `verify`'s ``problems``: what was done, one line each."""
    store = ResultStore(results_dir)
    done = []
    broken_arrays = {
        p.path.stem for p in problems if p.cell is None and p.path.parent.name == "arrays"
    }
    cells = {p.cell for p in problems if p.cell} | _cells_naming(store, broken_arrays)
    for cell_hash in sorted(cells):
        with cell_lock(store.root, cell_hash):
            folder = store.quarantine(cell_hash)
        done.append(f"moved cell {cell_hash} to {folder}")
    for problem in problems:
        stray = problem.path.suffix == ".csv" or "a leftover" in problem.reason
        if problem.cell is None and stray and problem.path.exists():
            folder = store.damaged_folder()
            os.replace(problem.path, folder / problem.path.name)
            done.append(f"moved {problem.path.name} to {folder}")
    for content in sorted(broken_arrays):
        path = store.root / "arrays" / f"{content}.npz"
        folder = store.damaged_folder()
        os.replace(path, folder / path.name)
        done.append(f"moved shared arrays {path.name} to {folder}")
    damaged_indexes = [
        index
        for index in (DataNames(store.root), MethodNames(store.root))
        if any(p.path == index.path for p in problems)
    ]
    configs = store.configs() if damaged_indexes else {}  # after the moves: the cells left
    for index in damaged_indexes:
        index.rebuild(configs)
        done.append(f"rebuilt {index.path} from the cells' configs")
    for problem in problems:
        if problem.path.name.endswith(".tmp") and problem.path.exists():
            problem.path.unlink()
            done.append(f"removed {problem.path}")
    return done


def _cells_naming(store: ResultStore, contents: set[str]) -> set[str]:
    """The cells whose predictions name one of the shared arrays files ``contents``."""
    if not contents:
        return set()
    naming = set()
    for path in store.root.glob("*.npz"):
        if fold_predictions.shared_names(path) & contents:
            naming.add(path.stem)
    return naming
