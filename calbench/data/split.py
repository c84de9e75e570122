"""One rule for sets that come as a single part (a network's outputs on the test images only,
as netcal publishes them, or a user's ``logits``/``probs`` + ``y`` npz): a seeded, stratified
split into a calibration part and a test part.

``split: {cal_size: 0.5, seed: 0}`` in a data set's config: ``cal_size`` is a share of the
rows (a float in (0, 1)) or a number of rows (an int); every class is split in that share
(scikit-learn's `StratifiedShuffleSplit`, whose draw the seed fixes), and each part keeps
the file's row order. The split is the data set's, not the run's: its own seed, so two runs
with different seeds calibrate on the same rows, and the cell hash holds it.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedShuffleSplit

from calbench.errors import CalbenchError

#: The split of a single-part set where its config names none: half the rows, seed 0.
DEFAULT_SPLIT = {"cal_size": 0.5, "seed": 0}


def split_rows(y: np.ndarray, cal_size=0.5, seed: int = 0, where: str = "") -> tuple:
    """(calibration rows, test rows): sorted, disjoint and together every row of ``y``."""
    y = np.asarray(y)
    n = len(y)
    where = f"{where}: " if where else ""
    if isinstance(cal_size, bool) or not isinstance(cal_size, (int, float, np.number)):
        raise CalbenchError(f"{where}split.cal_size must be a share in (0, 1) or a row count.")
    count = int(round(cal_size * n)) if isinstance(cal_size, float) else int(cal_size)
    if not 0 < count < n:
        raise CalbenchError(
            f"{where}split.cal_size={cal_size} leaves {count} of {n} rows for calibration; "
            "give a share in (0, 1) or a count between 1 and the number of rows - 1."
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CalbenchError(f"{where}split.seed must be a non-negative integer; got {seed!r}.")
    labels, counts = np.unique(y, return_counts=True)
    if counts.min() < 2:
        rare = labels[counts < 2].tolist()
        raise CalbenchError(
            f"{where}class(es) {rare} have a single row, so a stratified split cannot put "
            "them in both parts; drop them or supply the calibration and test parts yourself."
        )
    splitter = StratifiedShuffleSplit(n_splits=1, train_size=count, random_state=seed)
    try:
        cal, test = next(splitter.split(np.zeros(n), y))
    except ValueError as exc:  # a part too small to hold every class once
        raise CalbenchError(f"{where}cannot split {n} rows stratified: {exc}") from None
    return np.sort(cal), np.sort(test)


def split_options(split) -> dict:
    """A config's ``split`` block with the defaults filled in (unknown keys refused)."""
    options = dict(DEFAULT_SPLIT if split is None else split)
    unknown = sorted(set(options) - set(DEFAULT_SPLIT))
    if unknown:
        raise CalbenchError(f"split takes cal_size and seed; got unknown key(s) {unknown}.")
    return {**DEFAULT_SPLIT, **options}
