"""Hyperparameter choice: by inner K-fold CV on log-loss, or on separate validation scores.

The inner folds are stratified (``inner_cv="stratified"``, the default) or plain shuffled
K-fold (``inner_cv="kfold"``: scikit-learn's ``KFold(K, shuffle=True, random_state=seed)``,
as Valk's code splits; with seed 0 and the data set's own order the folds are his).

For each point of the method's grid, the calibrator is fitted on K-1 inner folds and scored
by log-loss on the held-out fold; the point with the lowest pooled out-of-fold log-loss
wins. Then either the winner is refitted on all the fitting data, or (Kull et al.) the K
inner models of the winner are kept and their predictions averaged.

`select_on_validation` is Kull et al.'s choice for their non-neural study: every grid point
is fitted on the calibration data and rated on other scores (the classifier's own training
part); one-vs-rest maps pick their point per class, on that class's binary log-loss, as
their ``OneVsRestCalibrator`` hands each binary calibrator its own validation column.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import KFold, ParameterGrid, StratifiedKFold

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import OneVsRestCalibrator
from calbench.errors import check_choice
from calbench.metrics import log_loss
from calbench.runner.protocols import check_class_counts


class AveragedCalibrator(Calibrator):
    """Averages the probabilities of already fitted calibrators (Kull's inner-model ensemble)."""

    def __init__(self, members=()):
        self.members = members

    def _fit(self, logits, y):
        pass

    def _predict_proba(self, logits):
        return np.mean([m.predict_proba(logits) for m in self.members], axis=0)


def select_and_fit(
    calibrator: Calibrator,
    grid: dict,
    logits: np.ndarray,
    y: np.ndarray,
    *,
    inner_folds: int = 10,
    average_inner_models: bool = False,
    seed: int = 0,
    score=log_loss,
    inner_cv: str = "stratified",
) -> tuple[Calibrator, dict]:
    """Fit ``calibrator`` on (logits, y), its grid chosen by inner CV.

    ``score(probs, y)`` (lower is better) rates the pooled out-of-fold predictions of each
    grid point: the log-loss unless the criterion asks for another (Ho 3.6 picks the Direct
    Loss's lambda by the empirical risk).

    Returns the fitted predictor and the chosen parameters (empty without a grid).
    """
    points = list(ParameterGrid(grid)) if grid else [{}]
    if len(points) == 1 and not average_inner_models:
        return clone(calibrator).set_params(**points[0]).fit(logits, y), points[0]
    n_classes = logits.shape[1]
    check_choice(inner_cv, "inner_cv", "protocol", ("stratified", "kfold"))
    check_class_counts(y, n_classes, inner_folds, "calibration data (inner CV)")
    splitter = StratifiedKFold if inner_cv == "stratified" else KFold
    splits = list(splitter(inner_folds, shuffle=True, random_state=seed).split(logits, y))
    # Calibrators that can warm-start walk the grid with one model per inner fold, each
    # fit starting from the previous grid point's solution (the same optimum, fewer steps).
    warm = "warm_start" in calibrator.run_input_keys("warm_start")  # not a step's
    prefix = _prefix_key(calibrator, grid)
    if prefix is not None:  # one fit per inner fold, at the largest value
        longest = {prefix: max(point[prefix] for point in points)}
        runners = [clone(calibrator).set_params(**longest).fit(logits[f], y[f]) for f, _ in splits]
    else:
        runners = [
            clone(calibrator).set_params(**({"warm_start": True} if warm else {})) for _ in splits
        ]
    best = (np.inf, None, None)
    for params in points:
        out_of_fold = np.empty((len(y), n_classes))
        models = []
        for runner, (fit_idx, held_idx) in zip(runners, splits, strict=True):
            if prefix is not None:
                model = runner.truncated(prefix, params[prefix])
            else:
                model = runner if warm else clone(calibrator)
                model.set_params(**params).fit(logits[fit_idx], y[fit_idx])
            out_of_fold[held_idx] = model.predict_proba(logits[held_idx])
            models.append(copy.deepcopy(model) if warm else model)
        value = score(out_of_fold, y)
        if value < best[0]:
            best = (value, params, models)
    _, params, models = best
    if average_inner_models:
        return AveragedCalibrator(members=models).fit(logits, y), params
    return clone(calibrator).set_params(**params).fit(logits, y), params


def _prefix_key(calibrator: Calibrator, grid: dict) -> str | None:
    """The grid's one key, where it is a prefix parameter (`Calibrator.prefix_params`)."""
    if grid and len(grid) == 1 and next(iter(grid)) in calibrator.prefix_keys():
        return next(iter(grid))
    return None


def select_on_validation(
    calibrator: Calibrator,
    grid: dict,
    logits: np.ndarray,
    y: np.ndarray,
    logits_val: np.ndarray,
    y_val: np.ndarray,
    *,
    score=log_loss,
) -> tuple[Calibrator, dict]:
    """Fit every grid point on (logits, y); keep the one ``score`` rates best on
    (logits_val, y_val), the first of ties. One-vs-rest calibrators choose per class (the
    chosen parameters then hold one value per class)."""
    points = list(ParameterGrid(grid)) if grid else [{}]
    models = _fit_path(calibrator, points, logits, y)
    if len(points) == 1:
        return models[0], points[0]
    if isinstance(calibrator, OneVsRestCalibrator):
        model, best = OneVsRestCalibrator.combine_per_class(models, logits_val, y_val)
        return model, {name: [points[b][name] for b in best] for name in points[0]}
    values = [score(model.predict_proba(logits_val), y_val) for model in models]
    best = int(np.argmin(values))
    return models[best], points[best]


def _fit_path(calibrator: Calibrator, points: list[dict], logits, y) -> list[Calibrator]:
    """One fitted model per grid point, in the grid's order; a calibrator that can
    warm-start begins each fit at the previous point's solution (the same optimum of a
    convex objective, in a fraction of the Newton steps when the grid runs from strong to
    weak regularisation)."""
    if "warm_start" not in calibrator.run_input_keys("warm_start"):
        return [clone(calibrator).set_params(**point).fit(logits, y) for point in points]
    runner = clone(calibrator).set_params(warm_start=True)
    models = []
    for point in points:
        model = copy.deepcopy(runner.set_params(**point).fit(logits, y))
        models.append(model.set_params(warm_start=calibrator.get_params()["warm_start"]))
    return models
