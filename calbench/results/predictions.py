"""A cell's per-fold test predictions, stored beside its rows so nothing is refitted later.

Figures (reliability diagrams, KS graphs, simplex maps) and ``calbench rescore`` (a new
metric on stored cells) read them instead of fitting every method again. One compressed
``store/<hash>.npz`` per cell holds, for each outer fold ``i``:

- ``y/i``, ``probs/i`` (the calibrated test predictions, before any prior-shift
  correction), ``uncalibrated/i`` (softmax of the test logits);
- ``loss/i``: the loss matrix the fold's decision metrics were scored with; under a prior
  shift ``prior_train/i`` and ``prior_test/i`` (and ``prior_estimated/i`` where the Bayes
  correction estimated the test prior, ``shift.estimate``); where the true map is known
  (synthetic data) ``true_probs/i``;
- on 3-class data ``simplex/i``: the calibrated map at `calbench.simplex.map_points`, what
  a simplex map draws.

Labels, uncalibrated and true probabilities are the same for every method on a fold: they
are stored once, together in one content-addressed file per fold under ``store/arrays/``
(valk_synthetic's 14 cells take about a third of the space they would otherwise; one file
rather than one per array saves a sweep's cell two synced writes on new data,
`benchmarks.bench_sweep`). Stores written before keep one file per array; both are read.
The files are written atomically before the rows, and the cell file's SHA-256 goes into
the rows (column ``predictions_sha256``), so a reader knows the file is the one the rows came from.
``predictions: float32`` (or ``auto`` above a million entries per array) halves the file;
``predictions: none`` stores none.
"""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from calbench.atomic import atomic_write_bytes
from calbench.decision.shift import adapt_posteriors
from calbench.errors import CalbenchError
from calbench.metrics import evaluate
from calbench.npz import npz_arrays

#: Above this many entries in an array, ``predictions: auto`` stores float32.
AUTO_FLOAT32_ENTRIES = 1_000_000
STORAGE = ("auto", "float64", "float32", "none")


@dataclass
class FoldPredictions:
    """One outer fold's test predictions and what its metrics were scored with."""

    fold: int
    y: np.ndarray
    probs: np.ndarray
    uncalibrated: np.ndarray
    loss: np.ndarray
    true_probs: np.ndarray | None = None
    prior_train: np.ndarray | None = None
    prior_test: np.ndarray | None = None
    prior_estimated: np.ndarray | None = None
    simplex: np.ndarray | None = None

    def scores(self, metrics_config: dict) -> dict[str, float]:
        """The configured metrics of these predictions; under a prior shift they are
        Bayes-corrected (Ho eq. 3.36; to the estimated test prior where there is one) and
        the risks importance-weighted by the true one (eqs. 3.37-3.38)."""
        probs, uncalibrated, shift_weights = self.probs, self.uncalibrated, None
        if self.prior_train is not None:
            ratio = self.prior_test / self.prior_train
            shift_weights = {"labels": ratio, "inputs": probs @ ratio}
            corrected = self.prior_test if self.prior_estimated is None else self.prior_estimated
            probs = adapt_posteriors(probs, self.prior_train, corrected)
            uncalibrated = adapt_posteriors(uncalibrated, self.prior_train, corrected)
        return evaluate(
            metrics_config,
            probs,
            y=self.y,
            true_probs=self.true_probs,
            reference_probs=uncalibrated,
            loss_matrix=self.loss,
            shift_weights=shift_weights,
        )


_ARRAYS = [f.name for f in fields(FoldPredictions) if f.name != "fold"]
_FLOATING = ("probs", "uncalibrated", "true_probs", "simplex")
#: The same for every method on a fold: stored once, under ``arrays/<content hash>.npz``,
#: and named from the cell's file by that hash (``@uncalibrated/0``).
_SHARED = ("y", "uncalibrated", "true_probs")


def check_storage(storage: str) -> None:
    if storage not in STORAGE:
        raise CalbenchError(f"predictions={storage!r}: choose one of {', '.join(STORAGE)}.")


def _content_hash(*named: tuple[str, np.ndarray]) -> str:
    """A SHA-256 of named arrays: names, dtypes, shapes and bytes. One array stored alone
    (the earlier layout) is hashed without its name, as it was then."""
    digest = hashlib.sha256()
    for name, array in named:
        prefix = "" if len(named) == 1 and name == "array" else name
        digest.update(f"{prefix}{array.dtype.str}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


#: Arrays of more bytes than this are stored in the npz file uncompressed: at ImageNet
#: shape zlib's level 1 took 2.7 s for each 25,000 x 1,000 float32 array of probabilities
#: and saved 9% of its 100 MB (5 s of a cell's 60 on a GPU).
STORE_UNCOMPRESSED_BYTES = 16 * 2**20


def _npz_bytes(**arrays) -> bytes:
    """An npz file as `np.savez_compressed` writes it, but at zlib's level 1 (a 3-class
    cell's simplex map compresses in 1.3 ms instead of 7.4 ms, to 46 KB instead of 39),
    and arrays over `STORE_UNCOMPRESSED_BYTES` stored as they are."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, value in arrays.items():
            value = np.asanyarray(value)
            member_name = f"{name}.npy"
            if value.nbytes > STORE_UNCOMPRESSED_BYTES:
                member_name = zipfile.ZipInfo(member_name)
                member_name.compress_type = zipfile.ZIP_STORED
            with archive.open(member_name, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, value, allow_pickle=False)
    return buffer.getvalue()


def write(root: Path, cell_hash: str, folds: list[FoldPredictions], storage="auto") -> str:
    """Store a cell's folds under ``root`` (``storage``: see the module docstring); returns
    the SHA-256 of the cell's file, for its rows."""
    check_storage(storage)
    arrays = {}
    for fold in folds:
        shared = {}
        for name in _ARRAYS:
            value = getattr(fold, name)
            if value is None:
                continue
            value = np.asarray(value)
            if name in _FLOATING and (
                storage == "float32" or (storage == "auto" and value.size > AUTO_FLOAT32_ENTRIES)
            ):
                value = value.astype(np.float32)
            if name in _SHARED:
                shared[name] = value
            else:
                arrays[f"{name}/{fold.fold}"] = value
        content = _content_hash(*shared.items())
        path = root / "arrays" / f"{content}.npz"
        if not _holds(path, content):  # absent, or damaged: these arrays are its content
            atomic_write_bytes(path, _npz_bytes(**shared))
        arrays[f"@fold/{fold.fold}"] = np.array(content)
    data = _npz_bytes(**arrays)
    atomic_write_bytes(root / f"{cell_hash}.npz", data)
    return hashlib.sha256(data).hexdigest()


def read(root: Path, cell_hash: str, sha256: str) -> list[FoldPredictions]:
    """A cell's folds, after checking its file (and each shared array) is the one its rows
    were stored with."""
    path = root / f"{cell_hash}.npz"
    data = _existing(path)
    _check(path, hashlib.sha256(data).hexdigest(), sha256)
    by_fold: dict[int, dict] = {}
    for key, value in _load(path, data).items():
        name, fold = key.split("/")
        if name.startswith("@"):
            content = str(value)
            found = _shared(root / "arrays" / f"{content}.npz", content)
            # "@fold": the fold's shared arrays in one file; "@y" and the like: one array
            found = found if name == "@fold" else {name[1:]: found["array"]}
        else:
            found = {name: value}
        for name, value in found.items():
            if name in _FLOATING:
                value = value.astype(np.float64, copy=False)
            by_fold.setdefault(int(fold), {})[name] = value
    return [FoldPredictions(fold=fold, **arrays) for fold, arrays in sorted(by_fold.items())]


def check_shared(path: Path) -> None:
    """Raise `CalbenchError` unless the shared arrays file ``path`` holds what its name
    (its content's hash) says."""
    _check(path, _content_hash(*_load(path, _existing(path)).items()), path.stem)


def shared_names(cell_file: Path) -> set[str]:
    """The shared arrays files (content hashes) a cell's predictions file names; none
    where the file cannot be read."""
    try:
        arrays = _load(cell_file, _existing(cell_file))
    except CalbenchError:
        return set()
    return {str(value) for key, value in arrays.items() if key.startswith("@")}


def _holds(path: Path, content: str) -> bool:
    """Whether the shared arrays file ``path`` exists and holds what its name says."""
    if not path.is_file():
        return False
    try:
        _shared(path, content)
    except CalbenchError:
        _shared.cache_clear()
        return False
    return True


class DamagedPredictions(CalbenchError):
    """A cell's stored predictions, or the arrays they share, missing or not as stored."""


def _load(path: Path, data: bytes) -> dict[str, np.ndarray]:
    try:
        return npz_arrays(data, str(path))
    except CalbenchError as exc:
        raise DamagedPredictions(
            f"{exc} `calbench store verify --repair` moves it and the cells that name it "
            "aside; the next run recomputes them."
        ) from None


@functools.lru_cache(maxsize=16)  # every method of a fold names the same labels and scores
def _shared(path: Path, content: str) -> dict[str, np.ndarray]:
    arrays = _load(path, _existing(path))
    _check(path, _content_hash(*arrays.items()), content)
    for array in arrays.values():
        array.setflags(write=False)  # one copy serves every cell that names it
    return arrays


def _existing(path: Path) -> bytes:
    if not path.is_file():
        raise DamagedPredictions(
            f"{path} is missing although the cell's rows name it; rerun the cell with force=true."
        )
    return path.read_bytes()


def _check(path: Path, digest: str, expected: str) -> None:
    if digest != expected:
        raise DamagedPredictions(
            f"{path} does not match the checksum the cell's rows name: it was changed or "
            "replaced after the cell was stored. Rerun the cell with force=true."
        )
