"""Evaluation protocols: which samples fit the calibrator and which evaluate it.

- ``holdout``: the data set's own calibration / test split (one fold, index 0).
- ``nested``: calibration and test pooled, then stratified K-fold; each outer fold fits on
  K-1 parts (with the inner CV of `calbench.runner.selection`) and evaluates on the rest
  (Kull 4.1; Ho 3.6). Every fold is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import StratifiedKFold

from calbench.data import Dataset
from calbench.errors import CalbenchError, check_int


@dataclass
class Fold:
    index: int
    logits_fit: np.ndarray
    y_fit: np.ndarray
    logits_eval: np.ndarray
    y_eval: np.ndarray


def check_class_counts(y: np.ndarray, n_classes: int, n_folds: int, what: str) -> None:
    """Stratified K-fold needs every class at least K times: say so before sklearn does."""
    counts = np.bincount(y, minlength=n_classes)
    rare = np.flatnonzero(counts < n_folds)
    if len(rare):
        shown = ", ".join(f"class {c} has {counts[c]}" for c in rare[:5])
        raise CalbenchError(
            f"{what}: {shown} sample(s), fewer than the {n_folds} folds of stratified CV. "
            f"Lower the number of folds (protocol.*_folds) or drop the rare classes."
        )


def holdout(dataset: Dataset) -> Iterator[Fold]:
    yield Fold(0, dataset.logits_cal, dataset.y_cal, dataset.logits_test, dataset.y_test)


def nested(dataset: Dataset, outer_folds: int = 5, seed: int = 0) -> Iterator[Fold]:
    outer_folds = check_int(outer_folds, "outer_folds", "protocol nested", minimum=2)
    logits = np.vstack([dataset.logits_cal, dataset.logits_test])
    y = np.concatenate([dataset.y_cal, dataset.y_test])
    check_class_counts(y, dataset.n_classes, outer_folds, f"{dataset.name} (outer CV)")
    splitter = StratifiedKFold(outer_folds, shuffle=True, random_state=seed)
    for i, (fit_idx, eval_idx) in enumerate(splitter.split(logits, y)):
        yield Fold(i, logits[fit_idx], y[fit_idx], logits[eval_idx], y[eval_idx])


PROTOCOLS = {"holdout": holdout, "nested": nested}


def make_folds(dataset: Dataset, name: str, seed: int = 0, **options) -> Iterator[Fold]:
    if name not in PROTOCOLS:
        raise CalbenchError(f"Unknown protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}.")
    if name == "nested":
        return nested(dataset, seed=seed, **options)
    return holdout(dataset, **options)
