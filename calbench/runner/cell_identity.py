"""A cell's identity: what its config hash is taken of, decided here and nowhere else.

The rule: a cell is identified by what it computed on and with, so the same command finds
it "already in the store" exactly when it would compute the same numbers.

What enters the hash:

- the configuration that changes numbers, as resolved: the `CELL_KEYS` groups (experiment,
  seed, data set, method with its fixed parameters and grid, criterion, loss, shift,
  protocol, metrics). A method whose calibrator takes no criterion stores the criterion as
  ``none``, so a sweep over criteria runs it once;
- the data's content: a registered data set by its name and published SHA-256, a generated
  one by its options, the user's own files by their names and the SHA-256 of their bytes
  (`calbench.data.identity`), an HDF5 benchmark task by its file's name and its arrays'
  SHA-256 (`calbench.data.hdf5.task_identity`), never by the folder they sit in;
- the code of any calibrator outside the installed calbench release
  (`calbench.runner.code.code_identity`); calbench's own code, the standard library's and
  installed packages' are named by the versions in each row instead.

What is kept out: where and how the cell runs and is stored (``device``, ``n_jobs``, the
launcher, verbosity, ``results_dir`` and every other key of the run config outside
`CELL_KEYS`, which `calbench.runner.spec.CellSpec` keeps apart as ``run``).

A key added to a group later changes the hash of every cell whose YAML states it, so new
keys with a default that keeps the old numbers are read with that default where the YAML
leaves them out (`calbench.runner.protocols.Protocol`, `calbench.runner.plan.Criterion`).
Documented for users in ``docs/guide/results.md`` ("What a cell's identity holds").
"""

from __future__ import annotations

import copy

from calbench.calibrators.base import Calibrator
from calbench.data.identity import FILE_OPTIONS, identity_key
from calbench.hashing import config_hash
from calbench.runner.code import code_identity

#: The parts of the configuration that determine a cell's numbers (and so its hash).
CELL_KEYS = (
    "experiment",
    "seed",
    "dataset",
    "method",
    "criterion",
    "loss",
    "shift",
    "protocol",
    "metrics",
)


def cell_groups(spec, template: Calibrator, takes_criterion: bool) -> dict:
    """The identifying groups of a `calbench.runner.spec.CellSpec` (which imports
    `CELL_KEYS` from here), as stored beside the cell: the `CELL_KEYS` groups, the
    criterion as ``none`` where the calibrator takes none, and ``code`` where the
    calibrator runs code outside the installed release."""
    cell = copy.deepcopy({key: getattr(spec, key) for key in CELL_KEYS})
    if not takes_criterion:
        cell["criterion"] = {"name": "none"}
    code = code_identity(template)  # the user's own code: edited, it is another cell
    if code is not None:
        cell["code"] = code
    return cell


def cell_hash(cell: dict, data: dict | None) -> str:
    """The hash of a cell's groups (`cell_groups`) with its data named by content:
    ``data`` (`calbench.data.identity.data_identity`) for the user's own files."""
    return config_hash(_hashed(cell, data))


def _hashed(cell: dict, data: dict | None) -> dict:
    """The cell's groups with the user's own files named by their names and contents and an
    HDF5 benchmark task by the file's name and its arrays' SHA-256, rather than by the
    folder they sit in."""
    dataset = cell.get("dataset") or {}
    if data is not None:
        identity = {k: v for k, v in dataset.items() if k not in FILE_OPTIONS[dataset["loader"]]}
        return {**cell, "dataset": {**identity, "content": identity_key(data)}}
    if dataset.get("loader") != "hdf5":
        return cell
    from calbench.data.hdf5 import task_identity

    identity = dict(dataset)
    identity["path"] = task_identity(dataset["path"], str(dataset["task"]))
    return {**cell, "dataset": identity}
