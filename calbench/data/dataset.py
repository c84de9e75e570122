"""The `Dataset` record: calibration and test scores with labels, validated once on entry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from calbench.errors import CalbenchError
from calbench.simplex import probs_to_logits, softmax

# Probability rows may drift from 1 by float32 rounding; beyond this they are wrong data.
_ROW_SUM_TOLERANCE = 1e-4


@dataclass(eq=False)
class Dataset:
    """Scores and labels of one classifier on a calibration and a test split.

    Attributes
    ----------
    name : str
        Row label in results and tables.
    logits_cal, logits_test : ndarray of shape (n_samples, n_classes)
        Logits; for data given as probabilities, ``log(clip(p))`` (see ``is_logits``).
    y_cal, y_test : ndarray of shape (n_samples,)
        Integer labels in ``0 .. n_classes - 1``.
    is_logits : bool
        False when the source had probabilities only (methods on logits then work on
        log-probabilities, as in Valk 4.2.2).
    true_map : callable or None
        ``true_map(p) -> E[Y | P = p]`` where the calibration map is known (synthetic data).
    class_names : list of str or None
    source : str
        Where the data came from; named in error messages.
    """

    name: str
    logits_cal: np.ndarray
    y_cal: np.ndarray
    logits_test: np.ndarray
    y_test: np.ndarray
    is_logits: bool = True
    true_map: Callable[[np.ndarray], np.ndarray] | None = None
    class_names: list[str] | None = None
    source: str = field(default="")

    def __post_init__(self):
        where = self.source or self.name
        self.logits_cal = check_scores(self.logits_cal, "logits_cal", where)
        self.logits_test = check_scores(self.logits_test, "logits_test", where)
        k = self.logits_cal.shape[1]
        if self.logits_test.shape[1] != k:
            raise CalbenchError(
                f"{where}: logits_cal has {k} classes but logits_test has "
                f"{self.logits_test.shape[1]}; both splits must score the same classes."
            )
        self.y_cal = check_labels(self.y_cal, "y_cal", where, len(self.logits_cal), k)
        self.y_test = check_labels(self.y_test, "y_test", where, len(self.logits_test), k)
        if self.class_names is not None and len(self.class_names) != k:
            raise CalbenchError(
                f"{where}: {len(self.class_names)} class names given for {k} classes."
            )

    @classmethod
    def from_probabilities(cls, name, probs_cal, y_cal, probs_test, y_test, **kwargs) -> Dataset:
        """Build from probabilities: validated on the simplex, stored as ``log(clip(p))``."""
        where = kwargs.get("source") or name
        probs_cal = check_probabilities(probs_cal, "probs_cal", where)
        probs_test = check_probabilities(probs_test, "probs_test", where)
        return cls(
            name,
            probs_to_logits(probs_cal),
            y_cal,
            probs_to_logits(probs_test),
            y_test,
            is_logits=False,
            **kwargs,
        )

    @property
    def n_classes(self) -> int:
        return self.logits_cal.shape[1]

    @property
    def probs_cal(self) -> np.ndarray:
        return softmax(self.logits_cal)

    @property
    def probs_test(self) -> np.ndarray:
        return softmax(self.logits_test)


def check_scores(scores, field_name: str, where: str) -> np.ndarray:
    """A finite float64 matrix with at least one row and two columns."""
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CalbenchError(f"{where}: {field_name} is not a numeric array ({exc}).") from None
    if arr.ndim != 2:
        raise CalbenchError(
            f"{where}: {field_name} must have shape (n_samples, n_classes); got shape {arr.shape}."
        )
    if arr.shape[0] == 0 or arr.shape[1] < 2:
        raise CalbenchError(
            f"{where}: {field_name} has shape {arr.shape}; it needs at least one sample "
            "and two classes."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise CalbenchError(
            f"{where}: {field_name} has {int(bad.sum())} NaN or infinite values "
            f"(first at row {row}, column {col}); remove those samples or fix the export."
        )
    return arr


def check_probabilities(probs, field_name: str, where: str) -> np.ndarray:
    """Rows on the probability simplex (renormalised when off by rounding only)."""
    arr = check_scores(probs, field_name, where)
    if (arr < 0).any() or (arr > 1 + _ROW_SUM_TOLERANCE).any():
        raise CalbenchError(
            f"{where}: {field_name} has values outside [0, 1]; these are not probabilities "
            "(pass them as logits instead)."
        )
    sums = arr.sum(axis=1)
    off = np.abs(sums - 1) > _ROW_SUM_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise CalbenchError(
            f"{where}: rows of {field_name} must sum to 1; {int(off.sum())} rows do not "
            f"(row {row} sums to {sums[row]:.6g}). Renormalise them or supply logits."
        )
    return arr / sums[:, None]


def check_labels(y, field_name: str, where: str, n_samples: int, n_classes: int) -> np.ndarray:
    """Integer labels in 0..k-1, one per sample; a column vector is accepted."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise CalbenchError(
            f"{where}: {field_name} must be a vector of integer labels; got shape {arr.shape}."
        )
    if len(arr) != n_samples:
        raise CalbenchError(
            f"{where}: {field_name} has {len(arr)} labels but the scores have {n_samples} rows."
        )
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise CalbenchError(f"{where}: {field_name} must hold integer class labels.")
    elif arr.dtype.kind not in "iub":
        raise CalbenchError(
            f"{where}: {field_name} must hold integer class labels; got dtype {arr.dtype}."
        )
    arr = arr.astype(np.int64)
    out = (arr < 0) | (arr >= n_classes)
    if out.any():
        raise CalbenchError(
            f"{where}: {field_name} has labels outside 0..{n_classes - 1} "
            f"(e.g. {arr[out][0]}); labels must index the {n_classes} score columns."
        )
    return arr
