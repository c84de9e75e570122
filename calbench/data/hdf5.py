"""CalArena's HDF5 benchmark files, read as they are (probkit/CalArena
``calibration_benchmarks/<benchmark>.h5``): one group per task, ``DATASET/MODEL``, holding
``probas_cal``, ``labels_cal``, ``probas_test`` and ``labels_test``; binary tasks store the
positive class's probability, shape (n,) or (n, 1), or both columns.

``calbench run dataset=hdf5 dataset.path=FILE dataset.task=DATASET/MODEL`` runs one task;
`tasks` lists a file's tasks (``calbench data tasks FILE``, with filters, prints them as a
sweep value). A task is read alone, so memory is bounded by the largest task, not the file,
and its identity in a cell's hash is the file's name and a SHA-256 of that task's arrays
(`task_identity`), not the folder the file sits in.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench.errors import CalbenchError

ARRAYS = ("probas_cal", "labels_cal", "probas_test", "labels_test")


def _h5py():
    try:
        import h5py
    except ImportError:
        raise CalbenchError(
            "Reading HDF5 benchmark files needs h5py: pip install h5py (calbench's own "
            "install brings it)."
        ) from None
    return h5py


def _open(path):
    p = Path(path)
    if not p.is_file():
        raise CalbenchError(
            f"HDF5 benchmark file {str(p)!r} does not exist; give dataset.path=FILE "
            "(CalArena's calibration_benchmarks/<benchmark>.h5)."
        )
    try:
        return _h5py().File(p, "r")
    except OSError as exc:
        raise CalbenchError(f"{str(p)!r} is not a readable HDF5 file ({exc}).") from None


@dataclass(frozen=True)
class Task:
    """One task of a file: its name and what the filters look at."""

    name: str
    n_classes: int
    n_cal: int
    n_test: int

    @property
    def dataset(self) -> str:
        return self.name.split("/", 1)[0]


def _classes(probas) -> int:
    return 2 if probas.ndim == 1 or probas.shape[1] == 1 else int(probas.shape[1])


def tasks(path, *, min_classes=None, max_classes=None, max_rows=None, datasets=None):
    """The file's tasks (groups holding the four arrays), sorted, filtered by class count,
    calibration plus test rows, and data set name; only the arrays' shapes are read."""
    out = []
    h5py = _h5py()
    with _open(path) as f:

        def visit(name, node):
            held = [a for a in ARRAYS if hasattr(node, "keys") and a in node]
            if not held:
                return
            where = f"{str(path)!r}, task {name!r}"
            if len(held) < len(ARRAYS):  # a task cut short is named, never left out
                missing = [a for a in ARRAYS if a not in held]
                raise CalbenchError(f"{where}: arrays {missing} are missing.")
            groups = [a for a in ARRAYS if not isinstance(node[a], h5py.Dataset)]
            if groups:
                raise CalbenchError(
                    f"{where}: {groups[0]} is a group, not an array; a task holds the arrays "
                    f"{', '.join(ARRAYS)}."
                )
            check_task_name(path, name)
            cal, test = node["probas_cal"], node["probas_test"]
            out.append(Task(name, _classes(cal), cal.shape[0], test.shape[0]))

        f.visititems(visit)
    keep = [
        t
        for t in sorted(out, key=lambda t: t.name)
        if (min_classes is None or t.n_classes >= min_classes)
        and (max_classes is None or t.n_classes <= max_classes)
        and (max_rows is None or t.n_cal + t.n_test <= max_rows)
        and (not datasets or t.dataset in datasets)
    ]
    return keep


def check_task_name(path, task: str) -> None:
    """A task's name travels in a sweep's override (``dataset.task=a/b,c/d``) and names a
    data set (`hdf5_task_name`): the characters of `calbench.validation.NAME_PATTERN` and
    '/' between its data set and model."""
    from calbench.validation import MAX_NAME_LENGTH, NAME_PATTERN

    parts_ok = all(NAME_PATTERN.fullmatch(part) for part in task.split("/"))
    if not parts_ok or len(hdf5_task_name(path, task)) > MAX_NAME_LENGTH:
        raise CalbenchError(
            f"{str(path)!r}, task {task!r}: a task's name (DATASET/MODEL) may hold letters, "
            "digits, '_', '-' and '.' in each part, at most 100 characters with the file's "
            "name: rename the group (its characters cannot travel in a sweep or name files)."
        )


#: ``dataset.task=all`` in a sweep: every task of the file (`expand_all_tasks`).
ALL_TASKS = "all"


def _fetch_hint(filename: str) -> str | None:
    """The registered data set whose files include ``filename`` (None: no registered one)."""
    from calbench.data.registry import registered_sets

    owners = [n for n, s in registered_sets().items() if any(f.name == filename for f in s.files)]
    return owners[0] if owners else None


def expand_all_tasks(overrides: list[str], config) -> list[str]:
    """A sweep's overrides with ``dataset.task=all`` replaced by every task of the HDF5 file
    that ``config`` (the sweep's composed config) names in ``dataset.path``, as one sweep."""
    out = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") != "dataset.task" or value.strip() != ALL_TASKS:
            out.append(override)
            continue
        dataset = config.get("dataset") or {}
        path = dataset.get("path") if dataset.get("loader") == "hdf5" else None
        if not path or path == "???":
            raise CalbenchError(
                "dataset.task=all runs every task of one HDF5 file: choose it with dataset=hdf5 "
                "dataset.path=FILE (or a registered collection, e.g. dataset=calarena_cv_binary)."
            )
        if not Path(path).is_file():
            fetch = _fetch_hint(Path(path).name)
            raise CalbenchError(
                f"dataset.task=all: {path} does not exist"
                + (f"; `calbench data fetch {fetch}` downloads it" if fetch else "")
                + " (or give data_dir=FOLDER where it is)."
            )
        names = [t.name for t in tasks(path)]
        if not names:
            raise CalbenchError(f"dataset.task=all: {path} holds no task (DATASET/MODEL group).")
        _say_absent_tasks(Path(path), names)
        out.append(f"{key}={','.join(names)}")
    return out


def _say_absent_tasks(path: Path, names: list[str]) -> None:
    """Where the collection's experiment list lies beside the file (CalArena's
    ``<collection>-experiments.csv``), say which of its tasks the file lacks."""
    import sys

    import pandas as pd

    listing = path.with_name(f"{path.stem}-experiments.csv")
    if not listing.is_file():
        return
    listed = pd.read_csv(listing, usecols=["dataset", "model"], dtype=str)
    wanted = [f"{d}/{m}" for d, m in zip(listed["dataset"], listed["model"], strict=True)]
    absent = [t for t in wanted if t not in set(names)]
    if absent:
        shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        print(
            f"calbench: {path.name} holds {len(wanted) - len(absent)} of the {len(wanted)} tasks "
            f"{listing.name} lists; running those (absent: {shown}).",
            file=sys.stderr,
        )


def _as_two_columns(probas: np.ndarray) -> np.ndarray:
    p = np.asarray(probas, dtype=np.float64)
    if p.ndim == 1 or p.shape[1] == 1:
        p = p.reshape(-1)
        return np.column_stack([1.0 - p, p])
    return p


def read_task(path, task: str) -> dict[str, np.ndarray]:
    """The four arrays of one task, as stored."""
    if task in (None, "", "???"):
        raise CalbenchError(
            f"dataset.task is not set: name one task of {str(path)!r} with "
            "dataset.task=DATASET/MODEL (`calbench data tasks FILE` lists them), or run them "
            "all with -m dataset.task=all."
        )
    with _open(path) as f:
        if task not in f:
            known = [t.name for t in tasks(path)]
            hint = ", ".join(known[:8]) + (f" and {len(known) - 8} more" if len(known) > 8 else "")
            raise CalbenchError(
                f"{str(path)!r} has no task {task!r}; its tasks (DATASET/MODEL): {hint}. "
                "`calbench data tasks FILE` lists them all; `-m dataset.task=all` runs each."
            )
        group = f[task]
        missing = [a for a in ARRAYS if a not in group]
        if missing:
            raise CalbenchError(f"{str(path)!r}, task {task!r}: arrays {missing} are missing.")
        h5py = _h5py()
        arrays = {}
        for a in ARRAYS:
            if isinstance(group.get(a, getlink=True), h5py.ExternalLink):
                raise CalbenchError(
                    f"{str(path)!r}, task {task!r}: {a} is a link to another file; calbench "
                    "reads a task's arrays from its own file only (copy them in)."
                )
            if not isinstance(group[a], h5py.Dataset):
                raise CalbenchError(f"{str(path)!r}, task {task!r}: {a} is a group, not an array.")
            arrays[a] = group[a][()]
            if not isinstance(arrays[a], np.ndarray) or arrays[a].dtype.kind not in "biuf":
                kind = getattr(arrays[a], "dtype", type(arrays[a]))
                raise CalbenchError(
                    f"{str(path)!r}, task {task!r}: {a} holds {kind} values; a task's arrays "
                    "hold numbers (probabilities and integer labels)."
                )
        return arrays


@functools.lru_cache(maxsize=64)
def _task_sha256(path: str, mtime_ns: int, task: str) -> str:
    digest = hashlib.sha256()
    arrays = read_task(path, task)
    for name in ARRAYS:
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def task_identity(path, task: str) -> dict:
    """What a cell's hash records of a task: the file's name and its arrays' SHA-256, so a
    file moved to another folder keeps its cells and a changed task gets new ones."""
    p = Path(path)
    if not p.is_file():
        return {"file": p.name, "task": task}
    return {
        "file": p.name,
        "task": task,
        "task_sha256": _task_sha256(str(p), p.stat().st_mtime_ns, task),
    }


def hdf5_task_name(path, task: str) -> str:
    """``FILESTEM_DATASET_MODEL``: unambiguous beside calbench's registered sets (CalArena's
    c10/densenet40 is not calbench's c10_densenet40 file)."""
    return f"{Path(path).stem}_{task.replace('/', '_')}"


def load_hdf5(path, task, name=None, split_task=False):
    """One task of an HDF5 benchmark file as a `Dataset` of its probabilities (binary
    tasks as two classes). Rows are renormalised where float32 storage leaves them up to
    1e-4 off the simplex; anything further is an error naming the task. ``split_task``:
    the task's data set names the set and its model the classifier (``c10 / densenet40``,
    as CalArena's results name it), so a sweep's blocks are data sets, not tasks."""
    from calbench.data.dataset import Dataset

    check_task_name(path, task)
    arrays = read_task(path, task)
    parts = {}
    for split in ("cal", "test"):
        p = _as_two_columns(arrays[f"probas_{split}"])
        sums = p.sum(axis=1, keepdims=True)
        if not np.all(np.isfinite(p)) or np.any(np.abs(sums - 1.0) > 1e-4) or np.any(p < 0):
            raise CalbenchError(
                f"{str(path)!r}, task {task!r}: probas_{split} are not probabilities (rows "
                "must be finite, non-negative and sum to 1)."
            )
        # The labels as stored: `Dataset` refuses fractional or one-hot ones by name.
        parts[split] = (p / sums, np.asarray(arrays[f"labels_{split}"]))
    dataset, _, model = task.partition("/")
    if split_task and not model:
        raise CalbenchError(
            f"{str(path)!r}, task {task!r}: dataset.split_task needs DATASET/MODEL task names."
        )
    return Dataset.from_probabilities(
        name or (dataset if split_task else hdf5_task_name(path, task)),
        parts["cal"][0],
        parts["cal"][1],
        parts["test"][0],
        parts["test"][1],
        source=f"{path}:{task}",
        classifier_name=model if split_task else "none",
    )
