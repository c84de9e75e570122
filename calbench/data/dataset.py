"""The `Dataset` record: calibration and test scores with labels, validated once on entry."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from calbench.errors import CalbenchError
from calbench.simplex import probs_to_logits, softmax
from calbench.validation import check_labels, check_probabilities, check_scores


def _check_calibration_labels(y_cal: np.ndarray, n_classes: int, where: str) -> None:
    """Refuse calibration labels no calibrator can learn from (one class, fewer rows than
    classes); warn where some classes never occur (their rows get
    ``calibration_classes_missing``)."""
    present = np.unique(y_cal)
    if len(present) < 2:
        raise CalbenchError(
            f"{where}: every calibration label is class {present[0]}; a calibrator needs at "
            "least two classes in y_cal (temperature scaling would collapse to uniform)."
        )
    if len(y_cal) < n_classes:
        raise CalbenchError(
            f"{where}: {len(y_cal)} calibration rows for {n_classes} classes; a calibrator "
            "needs at least one row per class."
        )
    if len(present) < n_classes:
        absent = np.setdiff1d(np.arange(n_classes), present)
        shown = ", ".join(str(c) for c in absent[:8]) + (" ..." if len(absent) > 8 else "")
        warnings.warn(
            f"{where}: {len(absent)} of {n_classes} classes never occur in y_cal ({shown}); "
            "calibrators cannot learn them, and their rows say so "
            "(calibration_classes_missing).",
            UserWarning,
            stacklevel=4,
        )


def binary_classes(positive, k: int, where: str) -> tuple[list[int], list[int]]:
    """(class 1's classes, class 0's) of a two-class task made of a ``k``-class set:
    ``positive`` lists class 1's classes, or ``half`` takes the first ``k // 2`` (one
    setting for every set of a sweep, whatever its number of classes)."""
    if positive == "half":
        positive = range(k // 2)
    elif isinstance(positive, str):
        raise CalbenchError(
            f"{where}: binary.positive is a list of classes or half; got {positive!r}."
        )
    chosen = sorted({int(c) for c in positive})
    if not chosen or chosen[0] < 0 or chosen[-1] >= k or len(chosen) == k:
        raise CalbenchError(
            f"{where}: binary.positive must name some but not all of the classes 0..{k - 1}; "
            f"got {list(positive)}."
        )
    return chosen, [c for c in range(k) if c not in chosen]


#: The fewest test rows a data set may have (CalArena's smallest tasks have 10).
MIN_TEST_ROWS = 10


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
    classifier_name : str
        The model that made the scores, where a benchmark names it apart from the data set
        (a CalArena task ``c10/densenet40``); ``none`` otherwise. Tables then name the task
        ``data set / model`` and the leaderboard's blocks are the data sets.
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
    classifier_name: str = "none"

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
        _check_calibration_labels(self.y_cal, k, where)
        if len(self.y_test) < MIN_TEST_ROWS:
            raise CalbenchError(
                f"{where}: {len(self.y_test)} test row(s); a test set of fewer than "
                f"{MIN_TEST_ROWS} ranks methods by chance (one row gives every method an "
                "accuracy of 1 or 0). Give more test rows (or a larger test share of the split)."
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

    def as_binary(self, positive, names=None) -> Dataset:
        """This set as a two-class task: class 1 the ``positive`` classes, class 0 the rest,
        with logits ``(logsumexp(z_rest), logsumexp(z_positive))``, so that class 1's
        probability is the total of its classes' (CalArena's cv-binary CIFAR-10: animals,
        classes 2-7, against machines; `binary_classes`). ``names``: the two classes'
        names."""
        from scipy.special import logsumexp

        chosen, rest = binary_classes(positive, self.n_classes, self.source or self.name)

        def grouped(z):
            return np.column_stack([logsumexp(z[:, rest], axis=1), logsumexp(z[:, chosen], axis=1)])

        return dataclasses.replace(
            self,
            logits_cal=grouped(self.logits_cal),
            y_cal=np.isin(self.y_cal, chosen).astype(np.int64),
            logits_test=grouped(self.logits_test),
            y_test=np.isin(self.y_test, chosen).astype(np.int64),
            true_map=None,
            class_names=list(names) if names is not None else None,
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
