"""A benchmark's published per-task results read into calbench's store, so that
``calbench leaderboard``, ``tables`` and ``report`` work on them as on calbench's own runs.

CalArena (probkit/CalArena) publishes one CSV per collection and method,
``results/<collection>/<Method>.csv``: a row per task (``dataset, model, cal_size,
test_size`` and, for multiclass, ``n_classes``), then ``<Method>_brier``, ``_logloss``,
``_ece-15``, ``_accuracy`` (binary: also ``_kuiper``) and ``_time``, computed by probmetrics 1.3
in float32, every method at its defaults, one calibration/test split per task.
`import_calarena` stores each file as one cell of the experiment
``calarena_published_<collection>`` (``calarena_published_tabrepo_multiclass``, ...; not
``calarena_<collection>``, which would meet the preset ``calarena_cv_binary`` that
reproduces on calbench's own data): a task is ``dataset / model``, its data set the block
the leaderboard's bootstrap resamples (CalArena's own block bootstrap over data sets).
The rows are marked as published results, not runs: protocol ``published``, no predictions
(so no paired per-task tests), and the cell's config names the file and its SHA-256. A cell's
hash is the file's content, so importing again changes nothing and a changed file replaces
its cell.

The leaderboard adds CalArena's table of mean improvement over the uncalibrated model
(`calbench.stats.arena.improvement_over_uncalibrated`).
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.runner.store import ResultStore
from calbench.tables.groups import tasks_file
from calbench.yaml_text import dump_yaml

#: CalArena's metric suffixes -> calbench's metric names.
METRICS = {
    "brier": "brier",
    "logloss": "log_loss",
    "ece-15": "confidence_ece",
    "accuracy": "accuracy",
    "kuiper": "kuiper_error",
}
TASK_COLUMNS = ("dataset", "model", "cal_size", "test_size")
#: Where the experiment names come from.
PREFIX = "calarena_published_"


def method_name(calarena_name: str) -> str:
    """calbench's name for a CalArena method: its uncalibrated model is ``uncal`` and its
    TS ``ts`` (the leaderboard's reference), the others lower-cased (``SMS`` -> ``sms``,
    ``Venn-Abers`` -> ``venn_abers``)."""
    special = {"Base-model": "uncal"}
    return special.get(calarena_name, calarena_name.lower().replace("-", "_"))


def experiment_name(collection: str) -> str:
    return PREFIX + collection.replace("-", "_")


def _results_folder(source_dir) -> Path:
    root = Path(source_dir)
    folder = root / "results" if (root / "results").is_dir() else root
    if not folder.is_dir() or not any(p.is_dir() for p in folder.iterdir()):
        raise CalbenchError(
            f"{root} holds no CalArena results: expected results/<collection>/<Method>.csv "
            "(a checkout of probkit/CalArena, or ../shared/data/calarena_results)."
        )
    return folder


def read_result_file(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """One CalArena result file, read once: its long rows (dataset, classifier, metric,
    value, fit_seconds), its tasks' properties (sizes, classes) and its SHA-256; a file
    without its method's columns is named."""
    data = path.read_bytes()
    method = path.stem
    frame = pd.read_csv(io.BytesIO(data), dtype={"dataset": str, "model": str})
    missing = [c for c in TASK_COLUMNS if c not in frame]
    time_column = f"{method}_time"
    metrics = {m: name for m, name in METRICS.items() if f"{method}_{m}" in frame}
    if missing or not metrics or time_column not in frame:
        raise CalbenchError(
            f"{path} is not a CalArena result file: it needs the columns "
            f"{', '.join(TASK_COLUMNS)}, {method}_brier (and the other metrics) and "
            f"{time_column}; it has {', '.join(frame.columns[:8])}."
        )
    parts = [
        pd.DataFrame(
            {
                "dataset": frame["dataset"].astype(str),
                "classifier": frame["model"].astype(str),
                "metric": name,
                "value": frame[f"{method}_{suffix}"].astype(float),
                "fit_seconds": frame[time_column].astype(float),
            }
        )
        for suffix, name in metrics.items()
    ]
    rows = pd.concat(parts, ignore_index=True)
    properties = frame[[c for c in (*TASK_COLUMNS, "n_classes") if c in frame]]
    # A value CalArena left empty (CDF-Spline's log-loss where a probability reached 0) is
    # no number: that task is left out of the method's rankings on that metric.
    return (
        rows[np.isfinite(rows["value"])],
        properties.rename(columns={"model": "classifier"}),
        hashlib.sha256(data).hexdigest(),
    )


def import_calarena(source_dir, results_dir, collections=None) -> dict[str, tuple[int, int]]:
    """Store every CalArena result file under ``source_dir`` (or of ``collections`` only)
    in ``results_dir``'s store; returns experiment -> (tasks, methods)."""
    folder = _results_folder(source_dir)
    found = sorted(p for p in folder.iterdir() if p.is_dir())
    if collections:
        unknown = sorted(set(collections) - {p.name for p in found})
        if unknown:
            raise CalbenchError(
                f"no CalArena collection {unknown} in {folder}; it has "
                f"{', '.join(p.name for p in found)}."
            )
        found = [p for p in found if p.name in collections]
    store = ResultStore(results_dir)
    summary = {}
    for collection in found:
        experiment = experiment_name(collection.name)
        tasks, methods, properties = set(), 0, []
        for path in sorted(collection.glob("*.csv")):
            rows, task_sizes, sha256 = read_result_file(path)
            method = method_name(path.stem)
            cell_hash = hashlib.sha256(
                f"calarena-published\0{collection.name}\0{path.stem}\0{sha256}".encode()
            ).hexdigest()[:16]
            config = {
                "experiment": experiment,
                "method": {"name": method},
                "published": {
                    "source": "CalArena published results (probkit/CalArena results/)",
                    "collection": collection.name,
                    "method": path.stem,
                    "file": f"{collection.name}/{path.name}",
                    "sha256": sha256,
                },
            }
            store.write(
                cell_hash,
                rows.assign(
                    experiment=experiment,
                    method=method,
                    criterion="none",
                    loss="none",
                    shift="none",
                    protocol="published",
                    fold=0,
                    params="{}",
                    seed=0,
                    calbench_version="published",
                ),
                config_text=dump_yaml(config),
            )
            tasks |= set(zip(rows["dataset"], rows["classifier"], strict=True))
            properties.append(task_sizes)
            methods += 1
        _write_task_properties(results_dir, experiment, properties)
        summary[experiment] = (len(tasks), methods)
    return summary


def _write_task_properties(results_dir, experiment: str, parts: list[pd.DataFrame]) -> None:
    """``<results_dir>/tasks/<experiment>.csv``: each task's sizes and classes, which
    ``calbench leaderboard --by`` groups by (`calbench.tables.groups`)."""
    table = pd.concat(parts).drop_duplicates(["dataset", "classifier"])
    if "n_classes" not in table:
        table["n_classes"] = 2
    atomic_write_text(tasks_file(results_dir, experiment), table.to_csv(index=False))
