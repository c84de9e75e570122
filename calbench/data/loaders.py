"""Readers for user-supplied score files: our npz schema and Kull et al.'s pickles."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import numpy as np

from calbench.data.dataset import Dataset
from calbench.errors import CalbenchError

NPZ_SCHEMA = (
    "an npz with keys y_cal, y_test and either logits_cal, logits_test "
    "or probs_cal, probs_test (optional: class_names)"
)


def _existing_file(path, what: str) -> Path:
    if path is None or str(path) in ("", "???"):
        raise CalbenchError(f"No file given for {what}; set dataset.path=FILE.")
    p = Path(path).expanduser()
    if not p.is_file():
        raise CalbenchError(
            f"{what} file {str(p)!r} does not exist. Put it there (the papers' logit sets "
            "must be fetched on a connected machine) or point dataset.path or data_dir at it; "
            "relative paths are taken from the directory calbench runs in."
        )
    return p


def load_npz(path, name: str | None = None) -> Dataset:
    """Read ``NPZ_SCHEMA``: logits (or probabilities) and labels for calibration and test."""
    p = _existing_file(path, "npz dataset")
    try:
        with np.load(p, allow_pickle=False) as f:
            arrays = {key: f[key] for key in f.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise CalbenchError(f"Cannot read {str(p)!r} as an npz file ({exc}).") from None
    name = name or p.stem
    keys = set(arrays)
    missing = {"y_cal", "y_test"} - keys
    has_logits = {"logits_cal", "logits_test"} <= keys
    has_probs = {"probs_cal", "probs_test"} <= keys
    if missing or not (has_logits or has_probs):
        raise CalbenchError(f"{str(p)!r} has keys {sorted(keys)}; calbench reads {NPZ_SCHEMA}.")
    if has_logits and has_probs:
        raise CalbenchError(
            f"{str(p)!r} has both logits_* and probs_* keys; keep one kind so it is clear "
            "which the calibrators should use."
        )
    extra = {}
    if "class_names" in arrays:
        extra["class_names"] = [str(c) for c in arrays["class_names"]]
    source = str(p)
    if has_logits:
        return Dataset(
            name,
            arrays["logits_cal"],
            arrays["y_cal"],
            arrays["logits_test"],
            arrays["y_test"],
            source=source,
            **extra,
        )
    return Dataset.from_probabilities(
        name,
        arrays["probs_cal"],
        arrays["y_cal"],
        arrays["probs_test"],
        arrays["y_test"],
        source=source,
        **extra,
    )


def load_kull_pickle(
    path, name: str | None = None, trusted: bool = False, sha256: str | None = None
) -> Dataset:
    """Read Kull et al.'s ``((logits_val, y_val), (logits_test, y_test))`` pickle.

    The published files (``probs_<model>_<data>_logits.p``) hold logits despite the name.
    Unpickling can run code, so a file is opened only if its SHA-256 is ``sha256`` (the
    registry's sum of a registered set) or, where none is given, one of the registry's
    published sums, unless ``trusted=True`` (``dataset.trusted=true``) says you vouch for it.
    """
    p = _existing_file(path, "pickle dataset")
    if not trusted:
        from calbench.data.fetch import sha256_of
        from calbench.data.registry import published_checksums

        digest = sha256_of(p)
        if sha256 is not None and digest != sha256:
            raise CalbenchError(
                f"Refusing to unpickle {str(p)!r}: its SHA-256 ({digest[:16]}...) is not the "
                f"published file's ({sha256[:16]}...), so it is another or a damaged file. "
                "Fetch it again (calbench data fetch NAME), or pass dataset.trusted=true if "
                "you vouch for this one."
            )
        if sha256 is None and digest not in published_checksums():
            raise CalbenchError(
                f"Refusing to unpickle {str(p)!r}: unpickling runs code, and its SHA-256 "
                f"({digest[:16]}...) is not a published sum the registry knows. If you trust "
                "the file, pass dataset.trusted=true."
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
