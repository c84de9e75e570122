"""Input checks shared by data sets, calibrators and metrics: scores, probabilities, labels.

A ground module (it imports only `calbench.errors`), so that metrics and calibrators check
their inputs without importing the data package.
"""

from __future__ import annotations

import contextlib
import re

import numpy as np

from calbench.errors import CalbenchError

#: A name that labels rows and names files, tables and a page's anchors: an experiment's,
#: a method's, a data set's (a file's stem by default), a CalArena collection's or method's.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: CalArena's longest task name makes an 89-character data set name; figure files named by
#: several names are shortened where they would pass a file system's 255 bytes
#: (`calbench.plots.output.file_stem`).
MAX_NAME_LENGTH = 100


def check_name(name, what: str, fix: str = "") -> str:
    """``name`` as `NAME_PATTERN` and `MAX_NAME_LENGTH` allow, else one error naming
    ``what`` it is and ``fix``, the way to give another (``dataset.name=my_model``)."""
    text = str(name)
    rule = "letters, digits, '_', '-' and '.', starting with a letter or digit"
    if len(text) > MAX_NAME_LENGTH:
        problem = f"is {len(text)} characters long; at most {MAX_NAME_LENGTH}"
        text = text[:40] + "..."
    elif not NAME_PATTERN.fullmatch(text):
        problem = f"cannot name files, tables and page anchors: use {rule}"
    else:
        return text
    named = f"{what}={text!r}" if " " not in what else f"{what} {text!r}"  # a key, or words
    raise CalbenchError(f"{named} {problem}{'; ' + fix if fix else ''}.")


# Probability rows may drift from 1 by float32 rounding; beyond this they are wrong data.
_ROW_SUM_TOLERANCE = 1e-4


#: The arrays `trust_scores` vouched for within the innermost `scores_checked_once` (by id).
_TRUSTED: list[dict] = []


@contextlib.contextmanager
def scores_checked_once():
    """A scope in which `check_scores` passes the arrays `trust_scores` vouched for without
    reading them again: inner CV fits and predicts each fold's arrays at every grid point
    (at ImageNet shape, 36 points x 5 folds of 20,000 x 1,000 sums: 3 s). Those arrays must
    stay unchanged while it lasts (an identity cache cannot see writes); a scope inside
    another is the outer one."""
    if _TRUSTED:
        yield
        return
    _TRUSTED.append({})
    try:
        yield
    finally:
        _TRUSTED.pop().clear()


def trust_scores(*arrays, where: str) -> None:
    """Check each array once (`check_scores`) and, within `scores_checked_once`, let later
    checks of the same float64 array pass without reading it."""
    for array in arrays:
        checked = check_scores(array, "logits", where)
        if _TRUSTED and checked is array:  # not a conversion, which a later call repeats
            _TRUSTED[-1][id(array)] = array


def check_scores(scores, field_name: str, where: str) -> np.ndarray:
    """A finite float64 matrix with at least one row and two columns."""
    if is_trusted(scores):
        return scores
    return _checked_scores(scores, field_name, where)


def is_trusted(scores) -> bool:
    """Whether ``scores`` were checked once in this scope (`trust_scores`): reads of their
    entries are skipped (inner CV's fold slices at every grid point)."""
    return bool(_TRUSTED) and _TRUSTED[-1].get(id(scores)) is scores


def _checked_scores(scores, field_name: str, where: str) -> np.ndarray:
    if np.iscomplexobj(scores):  # float64 would drop the imaginary part without a word
        raise CalbenchError(f"{where}: {field_name} holds complex numbers; scores are real.")
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CalbenchError(f"{where}: {field_name} is not a numeric array ({exc}).") from None
    if arr.ndim == 1:
        binary = (
            "np.column_stack([1 - p, p])"
            if "prob" in field_name
            else "np.column_stack([0 * s, s]) (s the log-odds)"
        )
        raise CalbenchError(
            f"{where}: {field_name} must have shape (n_samples, n_classes); got a vector of "
            f"{len(arr)} values. One row: {field_name}[None]; a binary task's class-1 scores: "
            f"{binary}."
        )
    if arr.ndim != 2:
        raise CalbenchError(
            f"{where}: {field_name} must have shape (n_samples, n_classes); got shape {arr.shape}."
        )
    if arr.shape[0] == 0 or arr.shape[1] < 2:
        raise CalbenchError(
            f"{where}: {field_name} has shape {arr.shape}; it needs at least one sample "
            "and two classes."
        )
    # A NaN or infinity makes the extremes' difference non-finite, and so does a span no
    # float64 holds, so a finite difference clears the matrix in two reductions instead of
    # the elementwise test (inner CV checks every fold at every grid point).
    with np.errstate(over="ignore", invalid="ignore"):  # tested, and named below
        if np.isfinite(arr.max() - arr.min()):
            return arr
        spans = arr.max(axis=1) - arr.min(axis=1)
    bad = ~np.isfinite(arr)
    if bad.any() and (arr[bad] == -np.inf).all():  # log(0): probabilities of exactly zero
        raise CalbenchError(
            f"{where}: {field_name} has {int(bad.sum())} values of -inf (logs of zero "
            "probabilities?); calbench.simplex.probs_to_logits(p) takes the logs of "
            "probabilities with zeros floored."
        )
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise CalbenchError(
            f"{where}: {field_name} has {int(bad.sum())} NaN or infinite values "
            f"(first at row {row}, column {col}); remove those samples or fix the export."
        )
    # A softmax subtracts a row's largest score from the others: beyond float64's range
    # (1.8e308) that difference is infinite and the row's probabilities NaN.
    wide = ~np.isfinite(spans)
    if wide.any():
        row = int(np.argmax(wide))
        raise CalbenchError(
            f"{where}: {field_name} row {row} spans {arr[row].min():.3g} to "
            f"{arr[row].max():.3g}, a difference no float64 softmax holds ({int(wide.sum())} "
            "such rows); rescale the scores or fix the export."
        )
    return arr


def rows_off_one(sums: np.ndarray, tolerance: float) -> tuple[int, int, float] | None:
    """(how many rows, the first, its sum) of the row sums ``sums`` further than
    ``tolerance`` from 1; None where none is. The one test behind every "rows must sum to
    1" message (data loaded, metrics' inputs, a cell's predictions), each with its own fix."""
    off = np.abs(sums - 1) > tolerance
    if not off.any():
        return None
    row = int(np.argmax(off))
    return int(off.sum()), row, float(sums[row])


def check_probabilities(probs, field_name: str, where: str) -> np.ndarray:
    """Rows on the probability simplex (renormalised when off by rounding only)."""
    arr = check_scores(probs, field_name, where)
    if (arr < 0).any() or (arr > 1 + _ROW_SUM_TOLERANCE).any():
        raise CalbenchError(
            f"{where}: {field_name} has values outside [0, 1]; these are not probabilities "
            "(pass them as logits instead)."
        )
    sums = arr.sum(axis=1)
    off = rows_off_one(sums, _ROW_SUM_TOLERANCE)
    if off:
        count, row, total = off
        raise CalbenchError(
            f"{where}: rows of {field_name} must sum to 1; {count} rows do not "
            f"(row {row} sums to {total:.6g}). Renormalise them or supply logits."
        )
    return arr / sums[:, None]


def check_labels(y, field_name: str, where: str, n_samples: int, n_classes: int) -> np.ndarray:
    """Integer labels in 0..k-1, one per sample; a column vector is accepted."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 2 and arr.shape == (n_samples, n_classes) and np.isin(arr, (0, 1)).all():
        raise CalbenchError(
            f"{where}: {field_name} is one-hot encoded (shape {arr.shape}); give integer "
            "labels, one per sample: y.argmax(axis=1)."
        )
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
    elif arr.dtype.kind == "O" and all(isinstance(v, int | np.integer) for v in arr.tolist()):
        arr = arr.astype(np.int64)  # integers in an object array (a pandas column's)
    elif arr.dtype.kind not in "iub":
        raise CalbenchError(
            f"{where}: {field_name} must hold integer class labels; got dtype {arr.dtype}"
            + (
                ". Names as labels: np.unique(y, return_inverse=True)[1] numbers them."
                if arr.dtype.kind in "USO"
                else "."
            )
        )
    arr = arr.astype(np.int64)
    out = (arr < 0) | (arr >= n_classes)
    if out.any():
        raise CalbenchError(
            f"{where}: {field_name} has labels outside 0..{n_classes - 1} "
            f"(e.g. {arr[out][0]}); labels must index the {n_classes} score columns."
        )
    return arr
