"""The calibrator contract shared by every method.

A calibrator is a scikit-learn classifier on logits: ``fit(logits, y)`` returns self,
``predict_proba(logits)`` returns rows on the simplex. Methods defined on probabilities
apply the softmax themselves (``input_kind = "probabilities"``), so the conversion lives in
one place and is never guessed.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from calbench.calibrators.constraints import CONSTRAINTS
from calbench.errors import CalbenchError
from calbench.validation import check_labels, check_scores, is_trusted


class Calibrator(ClassifierMixin, BaseEstimator):
    """Base class: validates inputs once, then calls ``_fit`` / ``_predict_proba``."""

    #: "logits" for maps defined on logits, "probabilities" for maps on softmax outputs.
    input_kind = "logits"
    #: Constraints of this class's parameters beyond (or instead of) the shared ones.
    _parameter_constraints: dict = {}
    #: What the runner hands this calibrator from the run, each a parameter of that name:
    #: "criterion" (what to minimise, from the run's criterion config), "device" (where
    #: torch computes), "true_map" (the synthetic data's known map), "warm_start" (the
    #: inner CV may walk a grid from the previous point's solution). Nothing is inferred
    #: from parameter names; a contract test checks that declarations and parameters agree.
    run_inputs: tuple[str, ...] = ()
    #: Whether predictions can hold a certainty (a class at exactly 0, or within 1e-12 of
    #: 1; `calbench.calibrators.bounds`): "never" for smooth or averaged maps, "possible"
    #: where the fit (or the classifier's own scores) can give one, "bounded" where a
    #: pseudo-count keeps every class above a floor. See `certainty`.
    _certainty = "never"
    #: Where the certainties come from, for a run's note ("" : the map's own fit).
    _certainty_source = ""

    #: Learned attributes `learned` leaves out: what the data alone says.
    _NOT_LEARNED = frozenset(
        {"n_classes_", "classes_", "n_calibration_", "n_features_in_", "unconverged_"}
    )
    #: The most numbers an attribute may hold for `learned` to keep it (a per-class vector
    #: up to 64 classes; a full matrix up to 7).
    LEARNED_MAX_NUMBERS = 64

    def learned(self) -> dict:
        """What the fit learned, where it is small: every public attribute (or property)
        ending in ``_`` that is a number or holds at most `LEARNED_MAX_NUMBERS` numbers
        (TS's temperature, VS's vectors at up to 64 classes, ODIR's resolved strengths, the
        steps and the objective), as plain numbers and lists; the cell stores it."""
        names = {n for n in vars(self) if n.endswith("_") and not n.startswith("_")}
        names |= {
            n
            for klass in type(self).__mro__
            for n, v in vars(klass).items()
            if isinstance(v, property) and n.endswith("_") and not n.startswith("_")
        }
        out = {}
        for name in sorted(names - self._NOT_LEARNED):
            try:
                value = getattr(self, name)
            except (AttributeError, ValueError, TypeError):
                continue
            if isinstance(value, bool | np.bool_):
                out[name] = bool(value)
            elif isinstance(value, int | np.integer):
                out[name] = int(value)
            elif isinstance(value, float | np.floating):
                out[name] = float(value)
            elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
                if value.size <= self.LEARNED_MAX_NUMBERS:
                    out[name] = value.tolist()
        return out

    def default_strengths(self) -> str:
        """How this calibrator, made with no arguments, sets its penalties' strengths, in
        one line (``calbench list calibrators``); "-" where it has none."""
        return "-"

    def certainty(self) -> str:
        """One of "never", "possible" or "bounded" (see ``_certainty``); a test checks
        each calibrator's claim on the published DenseNet-40 file and on synthetic data."""
        return self._certainty

    def run_input_keys(self, name: str) -> list[str]:
        """The parameter keys that take the run's ``name`` (nested steps' included, as
        ``step__param``)."""
        return [name] if name in self.run_inputs else []

    #: Parameters along which the fit at a smaller value is the first part of the fit at a
    #: larger one (DEC's ``n_iterations``: the same seeded partitions, fewer of them). Inner
    #: CV over such a parameter fits once, at the grid's largest value, and scores every
    #: smaller one from `truncated`: the same numbers, a fraction of the work.
    prefix_params: tuple[str, ...] = ()

    def prefix_keys(self) -> list[str]:
        """`prefix_params` as parameter keys (nested steps' included, as ``step__param``)."""
        return list(self.prefix_params)

    def truncated(self, key: str, value) -> Calibrator:
        """This fitted model as fitted with ``key=value`` (a smaller value of one of its
        `prefix_keys`)."""
        raise NotImplementedError(f"{type(self).__name__} has no prefix parameters")

    def validate_params(self) -> None:
        """Check every parameter against its constraint (`calbench.calibrators.constraints`):
        one error naming the parameter, what it may be and what it got."""
        table = {**CONSTRAINTS, **self._parameter_constraints}
        for name, value in self.get_params(deep=False).items():
            rule = table.get(name)
            if rule is not None and not rule.accepts(value):
                raise CalbenchError(
                    f"The {name!r} parameter of {type(self).__name__} must be "
                    f"{rule.describe()}. Got {value!r} instead."
                )

    def fit(self, logits, y):
        """Fit the calibration map.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
        y : array-like of shape (n_samples,)
            Integer labels in ``0 .. n_classes - 1``.

        Returns
        -------
        self
        """
        owner = f"{type(self).__name__}.fit"
        self.validate_params()
        columns, trusted = _column_names(logits), is_trusted(logits)
        logits = check_scores(logits, "logits", owner)
        if not trusted:  # (read once, as check_scores reads them: not in inner CV's loop)
            _warn_if_probabilities(logits, owner)
        if columns is None:  # (scikit-learn's attribute, set for frames only)
            self.__dict__.pop("feature_names_in_", None)
        else:
            self.feature_names_in_ = np.asarray(columns, dtype=object)
        y = check_labels(y, "y", owner, len(logits), logits.shape[1])
        self.n_classes_ = logits.shape[1]
        self.classes_ = np.arange(self.n_classes_)
        self.n_calibration_ = len(y)
        self.unconverged_ = []
        before = self._parameters_of_own_class()
        self._fit(logits, y)
        self._check_parameters_kept(before)
        self._check_finite_state()
        return self

    def _parameters_of_own_class(self) -> dict | None:
        """A researcher's own class's parameters before its fit (None for calbench's own,
        which the contract tests hold to it)."""
        if type(self).__module__.startswith("calbench."):
            return None
        return self.get_params(deep=False)

    def _check_parameters_kept(self, before: dict | None) -> None:
        """A fit that set one of its own parameters: a cell is identified and stored by its
        parameters, so the stored cell would name a setting other than the one it ran
        (scikit-learn's contract too: what a fit learns goes in attributes ending in _)."""
        if before is None:
            return
        after = self.get_params(deep=False)
        for key, value in before.items():
            new = after.get(key)
            if new is value or (type(new) is type(value) and _plain_equal(new, value)):
                continue
            raise CalbenchError(
                f"{type(self).__name__}.fit changed its parameter {key!r} from {value!r} to "
                f"{new!r}: a calibrator keeps its parameters as set, and what its fit learns "
                f"goes in an attribute ending in _ (self.{key}_ = ...)."
            )

    def unconverged(self, message: str, stacklevel: int = 3) -> None:
        """Say that the fit stopped short of its optimum (steps run out, a line search
        that found nothing): a `ConvergenceWarning` now, and a line of ``unconverged_``,
        which the runner stores as the fold's ``fit_unconverged`` and every table marks.
        A calibrator of your own calls it where its optimiser reports failure."""
        warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel)
        self.unconverged_ = [*getattr(self, "unconverged_", []), message]

    def _check_finite_state(self) -> None:
        """A fit whose objective (``loss_``, where the calibrator keeps it) is NaN or
        infinite failed: refused here, never passed on as a map. (Other learned arrays may
        hold infinities on purpose: a tree's open thresholds.)"""
        loss = getattr(self, "loss_", None)
        if isinstance(loss, float | np.floating) and not np.isfinite(loss):
            raise CalbenchError(
                f"{type(self).__name__}.fit failed: its objective is {loss} (scores too "
                "large for its arithmetic?); nothing of it is used. Rescale the scores or "
                "choose another method."
            )

    def predict_proba(self, logits) -> np.ndarray:
        """Calibrated probabilities, ndarray of shape (n_samples, n_classes)."""
        check_is_fitted(self, "n_classes_")
        columns, fitted = _column_names(logits), getattr(self, "feature_names_in_", None)
        fitted = None if fitted is None else list(fitted)
        if columns is not None and fitted is not None and columns != fitted:
            raise CalbenchError(
                f"{type(self).__name__}.predict_proba: the logits' columns are {columns}, "
                f"but it was fitted on {fitted}; select them in that order "
                f"(df[{fitted}])."
            )
        logits = check_scores(logits, "logits", f"{type(self).__name__}.predict_proba")
        if logits.shape[1] != self.n_classes_:
            raise CalbenchError(
                f"{type(self).__name__} was fitted on {self.n_classes_} classes but got "
                f"logits with {logits.shape[1]} columns."
            )
        probs = self._predict_proba(logits)
        shape = np.shape(probs)
        if shape != logits.shape:  # a class's own _predict_proba (the metrics would blame the data)
            raise CalbenchError(
                f"{type(self).__name__}._predict_proba returned an array of shape {shape} "
                f"for logits of shape {logits.shape}: it must return one row of "
                f"{self.n_classes_} probabilities for each row of logits."
            )
        return self._bounded(probs)

    def predict(self, logits) -> np.ndarray:
        """The most probable class after calibration."""
        return self.predict_proba(logits).argmax(axis=1)

    def _fit(self, logits: np.ndarray, y: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _bounded(self, probs: np.ndarray) -> np.ndarray:
        """The bound on the predictions (`calbench.calibrators.bounds.PseudoCountBound`)."""
        return probs


def _column_names(scores) -> list[str] | None:
    """A DataFrame's column names (a class each), so that a frame reordered between fit and
    predict is refused, as scikit-learn refuses reordered features; None for arrays."""
    columns = getattr(scores, "columns", None)
    return None if columns is None else [str(c) for c in columns]


def _warn_if_probabilities(logits: np.ndarray, owner: str) -> None:
    """Every row non-negative and summing to 1: probabilities passed where logits go. A
    calibrator fitted on them fits a map of the wrong inputs, silently (``dir`` on softmax
    outputs, 2,000 + 2,000 seeded rows of 3 classes: held-out log-loss 0.854 against 0.814
    on their logs)."""
    if logits.min() < 0 or logits.max() > 1:
        return
    if np.abs(logits.sum(axis=1) - 1).max() <= 1e-6:
        warnings.warn(
            f"{owner}: every row of these logits is non-negative and sums to 1: they look "
            "like probabilities. calbench's calibrators take logits; pass "
            "calbench.simplex.probs_to_logits(p) (the log-probabilities, zeros floored).",
            UserWarning,
            stacklevel=3,
        )


def _plain_equal(a, b) -> bool:
    """Equal as plain values (numbers, text, None); other objects only as themselves."""
    if isinstance(a, bool | int | float | str | type(None)):
        return a == b or (isinstance(a, float) and a != a and b != b)
    return False


def calibrators_within(model) -> list:
    """``model`` and every calibrator among its parameters and its fitted parts, depth
    first (a composition's steps and their fits ``first_``, an average's members)."""
    out, queue = [], [model]
    while queue:
        item = queue.pop()
        if isinstance(item, Calibrator):
            out.append(item)
            queue.extend(item.get_params(deep=False).values())
            queue.extend(v for n, v in vars(item).items() if n.endswith("_") and n != "classes_")
        elif isinstance(item, list | tuple):
            queue.extend(item)
    return out


def unconverged(model) -> list[str]:
    """What `Calibrator.unconverged` said during the fit of ``model`` or of any calibrator
    within it."""
    return [m for c in calibrators_within(model) for m in getattr(c, "unconverged_", [])]
