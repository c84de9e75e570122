"""Readers of score files: our npz schema (two parts or one to split), Kull et al.'s pickles
and torch-saved (logits, labels) pairs."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from calbench.data.dataset import Dataset
from calbench.data.split import split_options, split_rows
from calbench.errors import CalbenchError
from calbench.npz import npz_arrays
from calbench.validation import check_labels, check_scores

NPZ_SCHEMA = (
    "an npz with keys y_cal, y_test and either logits_cal, logits_test or probs_cal, "
    "probs_test; or one set, y and either logits or probs, split by dataset.split "
    "(optional: class_names); a binary task may give class 1's score alone, a vector"
)


def _two_columns(kind: str, scores):
    """A binary task's class-1 scores (a vector) as two columns: probabilities ``(1 - p,
    p)``, logits ``(0, s)`` (``s`` the log-odds); matrices as they are."""
    scores = np.asarray(scores)
    if scores.ndim != 1:
        return scores
    scores = scores.astype(np.float64)
    rest = 1.0 - scores if kind == "probs" else np.zeros_like(scores)
    return np.column_stack([rest, scores])


def _existing_file(path, what: str) -> Path:
    if path is None or str(path) in ("", "???"):
        raise CalbenchError(f"No file given for {what}; set dataset.path=FILE.")
    p = Path(path).expanduser()
    if p.is_dir():
        raise CalbenchError(
            f"{what} file {str(p)!r} is a folder; name a file in it (dataset.path=FOLDER/FILE)."
        )
    if not p.is_file():
        raise CalbenchError(
            f"{what} file {str(p)!r} does not exist. Put it there (the papers' logit sets "
            "must be fetched on a connected machine) or point dataset.path or data_dir at it; "
            "relative paths are taken from the directory calbench runs in."
        )
    return p


def _check_sha256(p: Path, sha256: str | None) -> None:
    """Refuse a registered set's file whose bytes are not the published file's."""
    if sha256 is None:
        return
    from calbench.data.fetch import sha256_of

    digest = sha256_of(p)
    if digest != sha256:
        raise CalbenchError(
            f"Refusing {str(p)!r}: its SHA-256 ({digest[:16]}...) is not the published "
            f"file's ({sha256[:16]}...), so it is another or a damaged file. Fetch it again "
            "(calbench data fetch NAME) or point dataset.path at the published one."
        )


def _read_npz(p: Path, keys: dict | None) -> dict:
    """The arrays of an npz under calbench's key names (``keys``: calbench's name -> the
    file's, for files written with other names, e.g. netcal's ``predictions``)."""
    arrays = npz_arrays(p.read_bytes(), repr(str(p)))
    for ours, theirs in (keys or {}).items():
        if theirs not in arrays:
            raise CalbenchError(
                f"{str(p)!r} has no key {theirs!r} (dataset.keys.{ours}); it has {sorted(arrays)}."
            )
        arrays[ours] = arrays.pop(theirs)
    return arrays


def _two_parts(arrays: dict, p: Path, split) -> tuple[str, dict]:
    """("logits" or "probs", {cal, y_cal, test, y_test}) of either schema (a file holding
    both is refused: which of its two sets to read would be a guess)."""
    keys = set(arrays)
    one_set = [k for k in ("logits", "probs", "y") if k in keys]
    two_sets = [k for k in ("y_cal", "y_test") if k in keys]
    if one_set and two_sets:
        raise CalbenchError(
            f"{str(p)!r} holds both one set ({', '.join(one_set)}) and a calibration/test "
            f"split ({', '.join(two_sets)}); keep one schema, so it is clear which rows are "
            "read."
        )
    for kind in ("logits", "probs"):
        if {f"{kind}_cal", f"{kind}_test", "y_cal", "y_test"} <= keys:
            cal, test = arrays[f"{kind}_cal"], arrays[f"{kind}_test"]
            if np.ndim(cal) == np.ndim(test) == 1:  # both parts a binary task's vector
                for part in ("cal", "test"):
                    _check_binary(p, f"{kind}_{part}", arrays[f"y_{part}"])
                cal, test = _two_columns(kind, cal), _two_columns(kind, test)
            return kind, {
                "cal": cal,
                "y_cal": arrays["y_cal"],
                "test": test,
                "y_test": arrays["y_test"],
            }
    for kind in ("logits", "probs"):
        if {kind, "y"} <= keys:
            if np.ndim(arrays[kind]) == 1:
                _check_binary(p, kind, arrays["y"])
            scores = check_scores(_two_columns(kind, arrays[kind]), kind, str(p))
            y = check_labels(arrays["y"], "y", str(p), len(scores), scores.shape[1])
            cal, test = split_rows(y, **split_options(split), where=str(p))
            return kind, {
                "cal": scores[cal],
                "y_cal": y[cal],
                "test": scores[test],
                "y_test": y[test],
            }
    raise CalbenchError(f"{str(p)!r} has keys {sorted(keys)}; calbench reads {NPZ_SCHEMA}.")


def _check_binary(p, key: str, labels) -> None:
    """A vector of scores is read as a binary task's class-1 scores: labels above 1 then
    say the file meant another shape (the labels' own check spoke of "2 score columns"
    the file never had)."""
    if not np.issubdtype(np.asarray(labels).dtype, np.number) or not np.size(labels):
        return  # (names as labels: the labels' own check says what to do)
    top = np.max(labels)
    if top > 1:
        raise CalbenchError(
            f"{p.name}: {key} is a vector (one score a row), read as a binary task's class-1 "
            f"scores, but its labels go up to {top}; save one column per class "
            f"({key} of shape (rows, classes))."
        )


def load_npz(
    path, name: str | None = None, keys: dict | None = None, split=None, sha256=None
) -> Dataset:
    """Read ``NPZ_SCHEMA``: logits (or probabilities) and labels, either in a calibration
    and a test part or as one set that `calbench.data.split` divides (``split``: its
    ``cal_size`` and ``seed``). ``keys`` renames the file's arrays (``{probs: predictions,
    y: ground_truth}`` for netcal's records); ``sha256`` pins a registered file."""
    p = _existing_file(path, "npz dataset")
    _check_sha256(p, sha256)
    arrays = _read_npz(p, keys)
    kinds = [k for k in ("logits", "probs") if any(a.split("_")[0] == k for a in arrays)]
    if len(kinds) == 2:
        raise CalbenchError(
            f"{str(p)!r} has both logits and probs keys; keep one kind so it is clear "
            "which the calibrators should use."
        )
    kind, parts = _two_parts(arrays, p, split)
    extra = {"source": str(p)}
    if "class_names" in arrays:
        extra["class_names"] = [str(c) for c in arrays["class_names"]]
    build = Dataset if kind == "logits" else Dataset.from_probabilities
    return build(
        name or p.stem, parts["cal"], parts["y_cal"], parts["test"], parts["y_test"], **extra
    )


def load_torch_pair(
    path_cal, path_test, name: str | None = None, sha256: list | None = None
) -> Dataset:
    """Two ``torch.save``d tuples ``(logits, labels)``, the calibration and the test part
    (tensors saved on a GPU are read onto the CPU; ``weights_only``: no code is run)."""
    import pickle

    import torch

    sums = list(sha256) if sha256 else [None, None]
    if len(sums) != 2:
        raise CalbenchError(f"sha256 of a torch pair lists two sums (cal, test); got {sums}.")
    parts = []
    for which, path, digest in zip(("cal", "test"), (path_cal, path_test), sums, strict=True):
        p = _existing_file(path, f"torch {which} part")
        _check_sha256(p, digest)
        try:
            loaded = torch.load(p, map_location="cpu", weights_only=True)
            logits, labels = loaded
            parts += [logits.double().numpy(), labels.numpy()]
        except (
            OSError,
            RuntimeError,
            pickle.UnpicklingError,
            ValueError,
            TypeError,
            AttributeError,
        ) as exc:
            raise CalbenchError(
                f"Cannot read {str(p)!r} as a torch-saved tuple (logits, labels) "
                f"({type(exc).__name__}: {exc})."
            ) from None
    source = f"{path_cal} + {path_test}"
    return Dataset(name or Path(path_test).stem, *parts, source=source)


def load_kull_pickle(
    path, name: str | None = None, trusted: bool = False, sha256: str | None = None
) -> Dataset:
    """Read Kull et al.'s ``((logits_val, y_val), (logits_test, y_test))`` pickle.

    The published files (``probs_<model>_<data>_logits.p``) hold logits despite the name.
    Unpickling can run code, so a file is opened only if its SHA-256 is ``sha256`` (the
    registry's sum of a registered set) or, where none is given, one of the registry's
    published sums, unless ``trusted=True`` (``dataset.trusted=true``) says you vouch for it.
    """
    if not isinstance(trusted, bool):
        # A string ("no", "false", "off") is truthy: it must never open the file.
        raise CalbenchError(
            f"dataset.trusted must be true or false (a boolean); got {trusted!r} "
            f"({type(trusted).__name__}). Nothing was read: write dataset.trusted=true only for "
            "a pickle you vouch for, since unpickling runs code."
        )
    p = _existing_file(path, "pickle dataset")
    if not trusted:
        from calbench.data.fetch import sha256_of
        from calbench.data.registry import published_checksums

        _check_sha256(p, sha256)
        if sha256 is None and sha256_of(p) not in published_checksums():
            raise CalbenchError(
                f"Refusing to unpickle {str(p)!r}: unpickling runs code, and its SHA-256 "
                "is not a published sum the registry knows. If you trust the file, pass "
                "dataset.trusted=true."
            )
    try:
        with open(p, "rb") as f:
            obj = pickle.load(f, encoding="latin1")
        (logits_val, y_val), (logits_test, y_test) = obj
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise CalbenchError(
            f"Cannot read {str(p)!r} as a pickle of ((logits_val, y_val), "
            f"(logits_test, y_test)) ({type(exc).__name__}: {exc})."
        ) from None
    return Dataset(name or p.stem, logits_val, y_val, logits_test, y_test, source=str(p))
