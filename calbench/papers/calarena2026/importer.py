"""CalArena's published per-task results read into calbench's store (``calbench import
calarena DIR``, `calbench.results.importers`), so that ``calbench leaderboard``, ``tables``
and ``report`` work on them as on calbench's own runs.

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

import csv
import hashlib
import io
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.results.store import ResultStore
from calbench.tables.groups import tasks_file
from calbench.validation import check_name
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
#: The values each of CalArena's metrics can take; one outside is a damaged file.
RANGES = {
    "brier": (0.0, 2.0),
    "logloss": (0.0, float("inf")),
    "ece-15": (0.0, 1.0),
    "accuracy": (0.0, 1.0),
    "kuiper": (0.0, 1.0),
    "time": (0.0, float("inf")),
}
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


def _not_a_result_file(path: Path, problem: str) -> CalbenchError:
    return CalbenchError(f"{path}: {problem}; nothing was imported (fix or remove the file).")


def _parsed(path: Path, data: bytes) -> pd.DataFrame:
    """The file's table, every line holding the header's fields (a line with one more or
    one fewer, an empty file, a file cut mid-line: named, with the line)."""
    if not data.strip():
        raise _not_a_result_file(path, "the file is empty")
    if not data.endswith(b"\n"):
        raise _not_a_result_file(path, "its last line has no line end (a file cut short?)")
    try:
        lines = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _not_a_result_file(path, f"not a CSV text file ({exc})") from None
    width = len(lines[0])
    for number, fields in enumerate(lines[1:], start=2):
        if len(fields) != width:
            raise _not_a_result_file(
                path, f"line {number} has {len(fields)} fields where the header has {width}"
            )
    return pd.DataFrame(lines[1:], columns=lines[0])


def _numbers(
    path: Path, frame: pd.DataFrame, column: str, required: bool, bounds=(-np.inf, np.inf)
) -> pd.Series:
    """A column as numbers; an empty field is a missing value only where CalArena leaves
    some (a metric), and a field that is no finite number, or lies outside ``bounds``, is
    named with its line."""
    text = frame[column].str.strip()
    values = pd.to_numeric(text, errors="coerce")
    wrong = (values.isna() & ((text != "") | required)) | np.isinf(values)
    low, high = bounds
    outside = (values < low) | (values > high)
    for rows, problem in ((wrong, "is not a number"), (outside, f"lies outside [{low}, {high}]")):
        if rows.any():
            line = int(np.flatnonzero(rows.to_numpy())[0]) + 2
            raise _not_a_result_file(
                path, f"line {line}: {column} = {frame[column].iloc[line - 2]!r} {problem}"
            )
    return values.astype(float)


def _check_columns_and_tasks(path: Path, frame: pd.DataFrame, method: str) -> None:
    """No column that is none of CalArena's, some rows, and no task listed twice."""
    known = {*TASK_COLUMNS, "n_classes", *(f"{method}_{m}" for m in [*METRICS, "time"])}
    unknown = [c for c in frame.columns if c not in known]
    if unknown:  # a misspelt metric would otherwise go missing without a word
        raise _not_a_result_file(
            path,
            f"column {unknown[0]!r} is none of CalArena's ({method}_brier, "
            f"{method}_logloss, {method}_ece-15, {method}_accuracy, {method}_kuiper, "
            f"{method}_time and the task columns)",
        )
    if frame.empty:
        raise _not_a_result_file(path, "it holds a header and no rows")
    twice = frame.duplicated(["dataset", "model"], keep=False)
    if twice.any():
        first = frame[twice].iloc[0]
        lines = ", ".join(str(i + 2) for i in np.flatnonzero(twice.to_numpy())[:4])
        raise _not_a_result_file(
            path,
            f"task {first['dataset']} / {first['model']} is listed more than once (lines {lines})",
        )


def read_result_file(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """One CalArena result file, read once and checked whole: its long rows (dataset,
    classifier, metric, value, fit_seconds), its tasks' properties (sizes, classes) and its
    SHA-256. A file without its method's columns, with a damaged line, a field that is no
    number or a task listed twice is named with the line."""
    data = path.read_bytes()
    method = path.stem
    frame = _parsed(path, data)
    missing = [c for c in TASK_COLUMNS if c not in frame]
    time_column = f"{method}_time"
    metrics = {m: name for m, name in METRICS.items() if f"{method}_{m}" in frame}
    if missing or not metrics or time_column not in frame:
        raise CalbenchError(
            f"{path} is not a CalArena result file: it needs the columns "
            f"{', '.join(TASK_COLUMNS)}, {method}_brier (and the other metrics) and "
            f"{time_column}; it has {', '.join(frame.columns[:8])}."
        )
    _check_columns_and_tasks(path, frame, method)
    fit_seconds = _numbers(path, frame, time_column, required=True, bounds=RANGES["time"])
    parts = [
        pd.DataFrame(
            {
                "dataset": frame["dataset"],
                "classifier": frame["model"],
                "metric": name,
                "value": _numbers(
                    path, frame, f"{method}_{suffix}", required=False, bounds=RANGES[suffix]
                ),
                "fit_seconds": fit_seconds,
            }
        )
        for suffix, name in metrics.items()
    ]
    rows = pd.concat(parts, ignore_index=True)
    properties = frame[[c for c in (*TASK_COLUMNS, "n_classes") if c in frame]].copy()
    for column in properties.columns[2:]:
        properties[column] = _numbers(path, frame, column, required=True).astype(int)
    # A value CalArena left empty (CDF-Spline's log-loss where a probability reached 0) is
    # no number: that task is left out of the method's rankings on that metric.
    return (
        rows[np.isfinite(rows["value"])],
        properties.rename(columns={"model": "classifier"}),
        hashlib.sha256(data).hexdigest(),
    )


def _collections(folder: Path, collections) -> list[Path]:
    found = sorted(p for p in folder.iterdir() if p.is_dir())
    if collections:
        unknown = sorted(set(collections) - {p.name for p in found})
        if unknown:
            raise CalbenchError(
                f"no CalArena collection {unknown} in {folder}; it has "
                f"{', '.join(p.name for p in found)}."
            )
        found = [p for p in found if p.name in collections]
    for collection in found:
        check_name(collection.name, "CalArena collection folder", "rename the folder")
        if not any(collection.glob("*.csv")):
            raise CalbenchError(
                f"CalArena collection {collection} holds no result files (<Method>.csv); "
                "nothing was imported."
            )
    return found


def import_calarena(source_dir, results_dir, collections=None) -> dict[str, tuple[int, int]]:
    """CalArena's published results/<collection>/<Method>.csv files, each stored as a
    cell of the experiment calarena_published_<collection>.

    Every file under ``source_dir`` (or of ``collections`` only) goes into ``results_dir``'s
    store; returns experiment -> (tasks, methods). Every file is read
    and checked before anything is stored: a damaged one stores nothing."""
    folder = _results_folder(source_dir)
    read = {
        collection: [(path, read_result_file(path)) for path in sorted(collection.glob("*.csv"))]
        for collection in _collections(folder, collections)
    }
    for files in read.values():
        for path, _ in files:
            check_name(method_name(path.stem), "CalArena method (file stem)", "rename the file")
    store = ResultStore(results_dir)
    by_source = _cells_by_source(store)
    summary = {}
    for collection, files in read.items():
        experiment = experiment_name(collection.name)
        tasks, properties = set(), []
        imported = set()
        for path, (rows, task_sizes, sha256) in files:
            cell_hash = _store_file(store, experiment, collection.name, path, rows, sha256)
            imported.add(f"{collection.name}/{path.name}")
            for old in by_source.get(f"{collection.name}/{path.name}", set()) - {cell_hash}:
                store.remove(old)  # the file's earlier content: replaced, never averaged
            tasks |= set(zip(rows["dataset"], rows["classifier"], strict=True))
            properties.append(task_sizes)
        for source, cells in by_source.items():  # a file gone from the folder: its numbers too
            if source.split("/")[0] == collection.name and source not in imported:
                for old in cells:
                    store.remove(old)
        _write_task_properties(results_dir, experiment, properties)
        summary[experiment] = (len(tasks), len(files))
    return summary


def _cells_by_source(store: ResultStore) -> dict[str, set[str]]:
    """The stored cells of each imported file (``collection/Method.csv``)."""
    cells: dict[str, set[str]] = {}
    for cell_hash, config in store.configs().items():
        source = (config.get("published") or {}).get("file")
        if source:
            cells.setdefault(source, set()).add(cell_hash)
    return cells


def _store_file(store, experiment: str, collection: str, path: Path, rows, sha256: str) -> str:
    """One file as one cell; returns its hash."""
    method = method_name(path.stem)
    cell_hash = hashlib.sha256(
        f"calarena-published\0{collection}\0{path.stem}\0{sha256}".encode()
    ).hexdigest()[:16]
    source = f"{collection}/{path.name}"
    config = {
        "experiment": experiment,
        "method": {"name": method},
        "published": {
            "source": "CalArena published results (probkit/CalArena results/)",
            "collection": collection,
            "method": path.stem,
            "file": source,
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
    return cell_hash


def _write_task_properties(results_dir, experiment: str, parts: list[pd.DataFrame]) -> None:
    """``<results_dir>/tasks/<experiment>.csv``: each task's sizes and classes, which
    ``calbench leaderboard --by`` groups by (`calbench.tables.groups`)."""
    table = pd.concat(parts).drop_duplicates(["dataset", "classifier"])
    if "n_classes" not in table:
        table["n_classes"] = 2
    atomic_write_text(tasks_file(results_dir, experiment), table.to_csv(index=False))
