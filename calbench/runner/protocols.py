"""Evaluation protocols: which samples fit the calibrator and which evaluate it.

- ``holdout``: the data set's own calibration / test split (one fold, index 0); its grids
  by inner CV, or (``select_on="test_brier"``, to reproduce Valk's TS+DEC only) on the
  test part itself.
- ``nested``: calibration and test pooled, then stratified K-fold; each outer fold fits on
  K-1 parts (with the inner CV of `calbench.runner.selection`) and evaluates on the rest
  (Kull 4.1; Ho 3.6). Every fold is reported.
- ``classifier_cv`` (Kull 4.1's non-neural study, on a `FeatureSet`): repeated stratified
  outer folds; inside each, the classifier is trained on all but one of
  ``calibration_folds`` parts and scores the remaining part (where a calibrator is fitted)
  and the outer test part. The fold's prediction is the average of the calibrated
  predictions of those ``calibration_folds`` classifier-calibrator pairs. Grids are searched
  by inner CV on the calibration part (``select_on="inner_cv"``) or, as Kull et al. did,
  on the classifier's own training part (``select_on="classifier_training"``).

A `Fold` holds one or more `Member`s sharing the evaluation labels; the runner fits one
calibrator per member and averages their predictions on the evaluation part.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import StratifiedKFold

from calbench.data import Dataset, FeatureSet
from calbench.data.classifier_scores import scored_folds
from calbench.errors import CalbenchError, check_choice, check_int, unknown_name
from calbench.packs import PackRegistry


@dataclass
class Member:
    """Where one calibrator is fitted and what it predicts; with ``logits_val``, its grid
    is chosen on those scores instead of by inner CV on the fitting data."""

    logits_fit: np.ndarray
    y_fit: np.ndarray
    logits_eval: np.ndarray
    logits_val: np.ndarray | None = None
    y_val: np.ndarray | None = None
    #: How the grid points are rated on ``logits_val``: None the plan's way, or "brier".
    select_by: str | None = None


@dataclass
class Fold:
    index: int
    members: list[Member]
    y_eval: np.ndarray


def check_class_counts(y: np.ndarray, n_classes: int, n_folds: int, what: str) -> None:
    """Stratified K-fold needs every class it sees at least K times: say so before sklearn
    does. A class absent from ``y`` is no fold's problem (the folds stratify the classes
    present; the cell counts the absent one as ``calibration_classes_missing``), and lowering
    the folds could not bring it back."""
    counts = np.bincount(y, minlength=n_classes)
    rare = np.flatnonzero((counts > 0) & (counts < n_folds))
    if len(rare):
        shown = ", ".join(f"class {c} has {counts[c]}" for c in rare[:5])
        raise CalbenchError(
            f"{what}: {shown} sample(s), fewer than the {n_folds} folds of stratified CV. "
            f"Lower the number of folds (protocol.*_folds) or drop the rare classes."
        )


#: Where ``holdout`` chooses a grid point: by inner CV on the calibration part, or, only to
#: reproduce Valk's TS+DEC rows, on the test part itself by its Brier score, as his code
#: chose decision calibration's iteration count ("determined unfairly", his Table 3).
HOLDOUT_SELECT_ON = ("inner_cv", "test_brier")


def holdout(
    dataset: Dataset,
    seed: int = 0,  # noqa: ARG001 (no randomness)
    select_on: str = "inner_cv",
) -> Iterator[Fold]:
    check_choice(select_on, "select_on", "protocol holdout", HOLDOUT_SELECT_ON)
    member = Member(dataset.logits_cal, dataset.y_cal, dataset.logits_test)
    if select_on == "test_brier":
        member.logits_val, member.y_val, member.select_by = (
            dataset.logits_test,
            dataset.y_test,
            "brier",
        )
    yield Fold(0, [member], dataset.y_test)


def nested(dataset: Dataset, outer_folds: int = 5, seed: int = 0) -> Iterator[Fold]:
    outer_folds = check_int(outer_folds, "outer_folds", "protocol nested", minimum=2)
    logits = np.vstack([dataset.logits_cal, dataset.logits_test])
    y = np.concatenate([dataset.y_cal, dataset.y_test])
    check_class_counts(y, dataset.n_classes, outer_folds, f"{dataset.name} (outer CV)")
    splitter = StratifiedKFold(outer_folds, shuffle=True, random_state=seed)
    for i, (fit_idx, eval_idx) in enumerate(splitter.split(logits, y)):
        yield Fold(i, [Member(logits[fit_idx], y[fit_idx], logits[eval_idx])], y[eval_idx])


SELECT_ON = ("inner_cv", "classifier_training")


def classifier_cv(
    dataset: FeatureSet, seed: int = 0, select_on: str = "inner_cv", **options
) -> Iterator[Fold]:
    """Options as `calbench.data.classifier_scores.scored_folds` takes them, and where the
    grids are chosen (``select_on``, see the module docstring)."""
    check_choice(select_on, "select_on", "protocol classifier_cv", SELECT_ON)
    folds = scored_folds(dataset, seed=seed, **options)
    on_training = select_on == "classifier_training"
    for fold in folds:
        members = [
            Member(
                part.cal_logits,
                dataset.y[part.cal_index],
                part.test_logits,
                part.train_logits if on_training else None,
                dataset.y[part.train_index] if on_training else None,
            )
            for part in fold.parts
        ]
        yield Fold(fold.index, members, dataset.y[fold.test_index])


#: protocol name -> (fold generator, the kind of data it takes, its own options); a paper
#: pack brings its own the same way (its ``PROTOCOLS``), registered beside these.
LIBRARY_PROTOCOLS = {
    "holdout": (holdout, Dataset, ("select_on",)),
    "nested": (nested, Dataset, ("outer_folds",)),
    "classifier_cv": (
        classifier_cv,
        FeatureSet,
        ("repeats", "outer_folds", "calibration_folds", "cache_dir", "select_on"),
    ),
}
PROTOCOLS = PackRegistry("PROTOCOLS", LIBRARY_PROTOCOLS, "protocol")
#: How every protocol searches a grid by inner CV (`calbench.runner.selection.select_and_fit`).
INNER_KEYS = ("inner_folds", "average_inner_models", "inner_cv", "grid_patience", "widen_edges")
INNER_CV = ("stratified", "kfold")


@dataclass(frozen=True)
class Protocol:
    """A ``protocol`` config group, read once: how the folds are made (the generator's own
    options) and how grids are searched inside them."""

    name: str
    fold_options: dict
    inner_folds: int
    average_inner_models: bool
    # Keys a protocol YAML may leave out, with the values that give the papers' search;
    # left out, they stay out of its cells' hashes (`calbench.runner.cell_identity`).
    # `+protocol.grid_patience=1` stops a grid early and `+protocol.widen_edges=2` widens a
    # grid whose choice lies at its edge (`select_and_fit`).
    inner_cv: str = "stratified"
    grid_patience: int | None = None
    widen_edges: int = 0

    @classmethod
    def of(cls, protocol: dict) -> Protocol:
        """The record of a protocol config; unknown names, keys and values are errors."""
        name = protocol.get("name")
        if name not in PROTOCOLS:
            raise unknown_name("protocol", name, PROTOCOLS)
        option_names = PROTOCOLS[name][2]
        known = ("name", *option_names, *INNER_KEYS)
        extra = [k for k in protocol if k not in known]
        if extra:
            raise CalbenchError(
                f"unknown config key protocol.{extra[0]}: nothing reads it in protocol "
                f"{name!r}. Its keys are: {', '.join(known)}."
            )
        inner = {k: protocol[k] for k in INNER_KEYS if k in protocol}
        missing = [k for k in ("inner_folds", "average_inner_models") if k not in inner]
        if missing:
            raise CalbenchError(f"protocol {name!r} needs {' and '.join(missing)}.")
        owner = f"protocol {name}"
        inner["inner_folds"] = check_int(inner["inner_folds"], "inner_folds", owner, minimum=2)
        check_choice(inner.get("inner_cv", "stratified"), "inner_cv", owner, INNER_CV)
        if inner.get("grid_patience") is not None:
            check_int(inner["grid_patience"], "grid_patience", owner)
        if inner.get("widen_edges") is not None:
            check_int(inner["widen_edges"], "widen_edges", owner, minimum=0)
        else:
            inner.pop("widen_edges", None)
        options = {k: protocol[k] for k in option_names if k in protocol}
        return cls(name, options, **inner)

    def folds(self, dataset: Dataset | FeatureSet, seed: int = 0) -> Iterator[Fold]:
        """The folds of this protocol on ``dataset``."""
        generate, kind, _ = PROTOCOLS[self.name]
        if not isinstance(dataset, kind):
            if kind is FeatureSet:
                hint = "it trains a classifier, so it needs a feature set such as dataset=keel_iris"
            else:
                hint = "it needs a model's scores; feature sets need protocol=classifier_cv"
            raise CalbenchError(
                f"protocol {self.name!r} does not fit data set {dataset.name!r}: {hint}."
            )
        return generate(dataset, seed=seed, **self.fold_options)
