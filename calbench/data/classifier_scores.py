"""Classifier scores for Kull 4.1's nested protocol, computed once and cached.

For each repeat r and outer stratified fold o, the outer training part is split again into
``calibration_folds`` stratified parts; for each part c the classifier is trained on the
other parts and scores part c (the calibration data), the outer test part and its own
training parts (where Kull et al. choose the calibrators' hyperparameters: "we used the
training fold of the classifier to choose the hyperparameter values with the lowest
log-loss", Kull 4.1; experiments_neurips ``cv_calibration`` passes ``X_val=x_t``). Every
calibrator of the benchmark then reuses the same scores, so training the 11 classifiers is
paid once per (data set, classifier), not once per calibrator.

The cache is one ``.npz`` per (data set, classifier, protocol, seed), named by a hash of
everything that determines its contents, written atomically; a lock file makes concurrent
sweep jobs wait for the first one instead of training the same classifier twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import sklearn
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold

from calbench.atomic import atomic_save_npz
from calbench.data.classifiers import make_classifier
from calbench.data.tabular import FeatureSet
from calbench.errors import CalbenchError, check_int
from calbench.simplex import probs_to_logits


@dataclass
class ScoredPart:
    """One classifier's scores: on its calibration part, on the outer test part and on the
    part it was trained on."""

    cal_index: np.ndarray
    cal_logits: np.ndarray
    test_logits: np.ndarray
    train_index: np.ndarray
    train_logits: np.ndarray


#: The arrays of a `ScoredPart`, as the cache stores them.
PART_FIELDS = [f.name for f in fields(ScoredPart)]


@dataclass
class OuterFold:
    index: int  # repeat * outer_folds + fold
    test_index: np.ndarray
    parts: list[ScoredPart]


def _splits(y, n_folds, seed):
    return StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y)


def _scores(model, features, n_classes):
    """predict_proba as logits over all classes (a classifier sees every class: stratified)."""
    probs = model.predict_proba(features)
    if probs.shape[1] != n_classes:
        raise CalbenchError(
            f"the classifier returned {probs.shape[1]} score columns for {n_classes} classes."
        )
    return probs_to_logits(probs)


def _fit_part(data: FeatureSet, estimator, train_idx, cal_idx, test_idx) -> ScoredPart:
    model = clone(estimator)
    with warnings.catch_warnings():
        # Kull's classifiers run at scikit-learn defaults: MLP/logistic stop at their
        # iteration cap and QDA warns on collinear features, as in the paper's runs.
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        # scikit-learn 1.9 deprecates SVC(probability=True), the Platt-scaled SVC that
        # Kull's svc-linear and svc-rbf are; it still computes the same scores.
        warnings.simplefilter("ignore", FutureWarning)
        model.fit(data.features[train_idx], data.y[train_idx])
    return ScoredPart(
        cal_index=cal_idx,
        cal_logits=_scores(model, data.features[cal_idx], data.n_classes),
        test_logits=_scores(model, data.features[test_idx], data.n_classes),
        train_index=train_idx,
        train_logits=_scores(model, data.features[train_idx], data.n_classes),
    )


def compute_scored_folds(
    data: FeatureSet, repeats: int, outer_folds: int, calibration_folds: int, seed: int
) -> list[OuterFold]:
    estimator = make_classifier(data.classifier, data.standardize)
    folds = []
    for r in range(repeats):
        for o, (train_idx, test_idx) in enumerate(_splits(data.y, outer_folds, seed + r)):
            parts = [
                _fit_part(data, estimator, train_idx[fit], train_idx[cal], test_idx)
                for fit, cal in _splits(data.y[train_idx], calibration_folds, seed + r)
            ]
            folds.append(OuterFold(r * outer_folds + o, test_idx, parts))
    return folds


def _cache_key(data: FeatureSet, settings: dict) -> str:
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(data.features).tobytes())
    digest.update(np.ascontiguousarray(data.y).tobytes())
    meta = dict(settings, classifier=data.classifier, standardize=data.standardize)
    meta["sklearn"] = sklearn.__version__  # another version may train other models
    digest.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def _to_arrays(folds: list[OuterFold]) -> dict[str, np.ndarray]:
    arrays = {}
    for fold in folds:
        arrays[f"f{fold.index}_test_index"] = fold.test_index
        for c, part in enumerate(fold.parts):
            for name in PART_FIELDS:
                arrays[f"f{fold.index}_p{c}_{name}"] = getattr(part, name)
    return arrays


def _from_arrays(arrays, n_folds: int, n_parts: int) -> list[OuterFold]:
    return [
        OuterFold(
            f,
            arrays[f"f{f}_test_index"],
            [
                ScoredPart(**{name: arrays[f"f{f}_p{c}_{name}"] for name in PART_FIELDS})
                for c in range(n_parts)
            ],
        )
        for f in range(n_folds)
    ]


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def scored_folds(
    data: FeatureSet,
    *,
    repeats: int = 5,
    outer_folds: int = 5,
    calibration_folds: int = 3,
    seed: int = 0,
    cache_dir=None,
) -> list[OuterFold]:
    """The scored folds of ``data``'s classifier, from ``cache_dir`` when computed before."""
    owner = "protocol classifier_cv"
    repeats = check_int(repeats, "repeats", owner)
    outer_folds = check_int(outer_folds, "outer_folds", owner, minimum=2)
    calibration_folds = check_int(calibration_folds, "calibration_folds", owner, minimum=2)
    counts = np.bincount(data.y, minlength=data.n_classes)
    # A class must reach every outer fold, and every calibration part of the training part
    # that remains when its largest outer share (ceil(n / outer)) is held out: Kull's
    # cleveland (13 in its rarest class) passes 5 x 3 folds with 10 left for 3 parts.
    left = counts - np.ceil(counts / outer_folds).astype(int)
    short = (counts < outer_folds) | (left < calibration_folds)
    if short.any():
        rare = int(np.flatnonzero(short)[0])
        raise CalbenchError(
            f"{data.name}: class {rare} has {counts[rare]} samples, too few for "
            f"{outer_folds} outer folds and then {calibration_folds} calibration parts of "
            f"each training part ({left[rare]} left there). Lower protocol.outer_folds / "
            "protocol.calibration_folds or drop the class."
        )
    # layout 2: the training-part scores are stored too (caches of layout 1 lack them).
    settings = dict(
        repeats=repeats, outer=outer_folds, parts=calibration_folds, seed=seed, layout=2
    )
    if cache_dir is None:
        return compute_scored_folds(data, repeats, outer_folds, calibration_folds, seed)
    stem = f"{data.name}__{data.classifier_name}__{_cache_key(data, settings)}"
    path = Path(cache_dir) / f"{stem}.npz"
    with _locked(Path(cache_dir) / f".{stem}.lock"):
        if not path.is_file():
            folds = compute_scored_folds(data, repeats, outer_folds, calibration_folds, seed)
            atomic_save_npz(path, **_to_arrays(folds))
            return folds
    with np.load(path) as arrays:
        return _from_arrays(dict(arrays), repeats * outer_folds, calibration_folds)
