"""One cell of an experiment run: its folds fitted and scored -> tidy result rows (what to
fit and how comes from the cell's plan, `calbench.runner.plan`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import calbench
from calbench.calibrators.base import unconverged
from calbench.criteria import TRAINED_PER_EPS
from calbench.errors import CalbenchError
from calbench.metrics.scoring import brier, wrong_certainties
from calbench.results.predictions import FoldPredictions
from calbench.runner.plan import CellPlan
from calbench.runner.selection import (
    classes_left_out,
    inner_splits,
    runs_inner_cv,
    select_and_fit,
    select_on_validation,
)
from calbench.simplex import map_points, probs_to_logits, softmax


def fit_selected(plan: CellPlan, calibrator, grid, logits, y, score):
    """The protocol's hyperparameter choice (grid points rated by ``score``) and fit:
    (fitted model, chosen params)."""
    protocol = plan.protocol
    return select_and_fit(
        calibrator,
        grid,
        logits,
        y,
        inner_folds=protocol.inner_folds,
        average_inner_models=plan.average_inner_models,
        seed=plan.spec.seed,
        score=score,
        inner_cv=protocol.inner_cv,
        grid_patience=protocol.grid_patience,
        widen_edges=protocol.widen_edges,
    )


def _inner_classes_missing(plan: CellPlan, grid, y) -> int:
    """`classes_left_out` of the inner CV `fit_selected` ran (0 where it ran none)."""
    if not runs_inner_cv(grid, plan.average_inner_models):
        return 0
    protocol = plan.protocol
    return classes_left_out(
        y, inner_splits(y, protocol.inner_folds, protocol.inner_cv, plan.spec.seed)
    )


def public_params(chosen: dict, model=None) -> dict:
    """Chosen parameters as stored: a criterion spec shrinks to its name and scalar options
    (its loss matrices are in the cell's config); a value the fitted ``model`` adjusted
    (k clipped to the data size: ``n_neighbors_``) is stored as the value it used."""
    chosen = {k: getattr(model, f"{k}_", v) for k, v in chosen.items()}
    return {
        k: {o: v for o, v in value.items() if not isinstance(v, list)}
        if isinstance(value, dict)
        else value
        for k, value in chosen.items()
    }


def _check_simplex(plan: CellPlan, dataset, fold, probs):
    """Predictions on the simplex, or one line saying what is off and whose code made it:
    the user's own class (``code`` in the cell's identity) is hers to mend; calbench's own
    a bug to report."""
    where = f"method {plan.method!r} on {dataset.name} fold {fold.index}"
    own = "code" in plan.cell
    whose = (
        f"{plan.spec.method['calibrator']}'s _predict_proba must return rows of non-negative "
        "probabilities that sum to 1"
        if own
        else "this is a bug in calbench's calibrator, please report it"
    )
    bad = ~np.isfinite(probs)
    if bad.any():
        cause = (
            f"its fit with {plan.spec.method['calibrator']}'s parameters failed or {whose}"
            if own
            else "its fit failed on these scores: rescale them or choose another method"
        )
        raise CalbenchError(
            f"{where} produced NaN or infinite probabilities ({int(bad.any(axis=1).sum())} "
            f"rows); nothing was stored. {cause[0].upper()}{cause[1:]}."
        )
    negative = probs < 0
    if negative.any():
        raise CalbenchError(
            f"{where} produced negative probabilities ({int(negative.any(axis=1).sum())} "
            f"rows, the lowest {probs.min():.3g}); nothing was stored: {whose}."
        )
    drift = np.abs(probs.sum(axis=1) - 1).max()
    if drift > 1e-6:
        raise CalbenchError(
            f"{where} produced rows that do not sum to 1 (largest error {drift:.3g}); "
            f"nothing was stored: {whose}."
        )


@dataclass
class FoldFit:
    """A fold's calibrated test predictions (averaged over its members, Kull 4.1) and, on
    3-class data, the calibration map at `map_points` (averaged likewise)."""

    probs: np.ndarray
    uncalibrated: np.ndarray
    chosen: dict | list
    seconds: float
    simplex: np.ndarray | None = None
    #: The calibration data's calibrated posteriors and labels, where BBSE needs them.
    validation: tuple[np.ndarray, np.ndarray] | None = None
    #: (inner fold, class) pairs whose inner training part lacks a class (`classes_left_out`).
    inner_classes_missing: int = 0
    #: What the fit learned, where small (`Calibrator.learned`; a list for several members).
    fitted: dict | list = field(default_factory=dict)
    #: What the final fits said when they stopped short of their optimum (`unconverged`).
    unconverged: list = field(default_factory=list)


def _fit_fold(plan: CellPlan, dataset, task, fold, eps=None) -> FoldFit:
    """Fit one calibrator per member for the decision ``task`` at ``eps``."""
    calibrator, grid = plan.calibrator(dataset, task, eps)
    score = plan.selection_score(task.training_loss(eps))
    # A classifier's scores on its own training part are often exactly 0 or 1 (trees,
    # forests, k-NN), so there the log-loss is clipped as scikit-learn's was in Kull et
    # al.'s code, lest a few 708-per-sample terms decide the choice.
    on_training = plan.selection_score(task.training_loss(eps), log_loss_clip=1e-15)
    probs, uncalibrated, simplex, chosen, learned, seconds = [], [], [], [], [], 0.0
    validation, missing, short = [], 0, []
    for member in fold.members:
        start = time.perf_counter()
        if member.logits_val is None:
            model, params = fit_selected(
                plan, calibrator, grid, member.logits_fit, member.y_fit, score
            )
            missing += _inner_classes_missing(plan, grid, member.y_fit)
        else:
            model, params = select_on_validation(
                calibrator,
                grid,
                member.logits_fit,
                member.y_fit,
                member.logits_val,
                member.y_val,
                score=brier if member.select_by == "brier" else on_training,
            )
        seconds += time.perf_counter() - start
        short += unconverged(model)
        probs.append(model.predict_proba(member.logits_eval))
        uncalibrated.append(softmax(member.logits_eval))
        if dataset.n_classes == 3:  # what a simplex map draws, so figures never refit
            simplex.append(model.predict_proba(probs_to_logits(map_points())))
        chosen.append(public_params(params, model))
        learned.append(model.learned())
        if task.estimate == "bbse":  # its labelled validation set: the calibration data
            validation.append((model.predict_proba(member.logits_fit), member.y_fit))
    fit = FoldFit(
        _combine(probs),
        _combine(uncalibrated),
        chosen[0] if len(chosen) == 1 else chosen,
        seconds,
        _combine(simplex) if simplex else None,
        tuple(np.concatenate(part) for part in zip(*validation, strict=True)) or None,
        missing,
        learned[0] if len(learned) == 1 else learned,
        short,
    )
    return fit


def _combine(parts: list[np.ndarray]) -> np.ndarray:
    """A fold's members' predictions, averaged (Kull 4.1)."""
    return parts[0] if len(parts) == 1 else np.mean(parts, axis=0)


def _fold_predictions(dataset, task, fold, fit) -> FoldPredictions:
    true_probs = dataset.true_map(fit.uncalibrated) if dataset.true_map is not None else None
    train, test = task.priors if task.priors is not None else (None, None)
    ratio = task.estimated_ratio(fit.probs, fold.y_eval, validation=fit.validation)
    return FoldPredictions(
        fold=fold.index,
        y=fold.y_eval,
        probs=fit.probs,
        uncalibrated=fit.uncalibrated,
        loss=task.loss,
        true_probs=true_probs,
        prior_train=train,
        prior_test=test,
        prior_estimated=None if ratio is None else train * ratio / (train * ratio).sum(),
        simplex=fit.simplex,
    )


def run_cell(plan: CellPlan) -> pd.DataFrame:
    """Fit and evaluate the planned method on every fold of the protocol: its rows."""
    return evaluate_cell(plan)[0]


def evaluate_cell(plan: CellPlan) -> tuple[pd.DataFrame, list[FoldPredictions]]:
    """The cell's rows and each fold's stored predictions (`calbench.results.predictions`)."""
    dataset = plan.load_dataset()
    rows, stored = [], []
    for fold in plan.folds(dataset):
        task = plan.task(fold, dataset.n_classes)
        fit = _fit_fold(plan, dataset, task, fold)
        _check_simplex(plan, dataset, fold, fit.probs)
        predictions = _fold_predictions(dataset, task, fold, fit)
        values = _fold_values(plan, dataset, task, fold, fit, predictions)
        stored.append(predictions)
        params = json.dumps(fit.chosen, sort_keys=True)
        fitted = json.dumps(fit.fitted, sort_keys=True)
        for metric, value in values.items():
            rows.append((fold.index, metric, value, fit.seconds, params, fitted))
    return _cell_frame(plan, dataset, rows), stored


def _fold_values(plan: CellPlan, dataset, task, fold, fit, predictions) -> dict[str, float]:
    """Output name -> value of one fold: the metrics, the flags tables mark a cell by, and
    the decision task's curve; non-finite values are refused, naming them."""
    values = predictions.scores(plan.metrics)
    # The model's own accuracy where the calibrator was fitted (Hoki's "Val Acc.").
    values["fit_accuracy"] = float(
        np.mean([(m.logits_fit.argmax(axis=1) == m.y_fit).mean() for m in fold.members])
    )
    values["inner_classes_missing"] = float(fit.inner_classes_missing)
    fitted_on = np.unique(np.concatenate([m.y_fit for m in fold.members]))
    if len(fitted_on) < dataset.n_classes:  # a flag: only where some class is absent
        values["calibration_classes_missing"] = float(dataset.n_classes - len(fitted_on))
    values["wrong_certainties"] = wrong_certainties(fit.probs, fold.y_eval)
    if fit.unconverged:  # a flag, as above: tables mark the cell's values
        values["fit_unconverged"] = float(len(fit.unconverged))
    if plan.criterion_name in TRAINED_PER_EPS and task.curve:
        # One fit per point of the curve, each scored at its own eps.
        for eps in task.direct_points:
            at_eps = fit if eps == task.eps else _fit_fold(plan, dataset, task, fold, eps)
            values.update(task.curve_values(at_eps.probs, fold.y_eval, [eps], at_eps.validation))
    else:
        values.update(task.curve_values(fit.probs, fold.y_eval, validation=fit.validation))
    bad = sorted(m for m, v in values.items() if not np.isfinite(v))
    if bad:
        raise CalbenchError(
            f"method {plan.method!r} on {dataset.name} fold {fold.index} gave non-finite "
            f"{bad}; nothing was stored. Check the method's settings (e.g. a cropping "
            "epsilon of 0 lets a zero probability reach the log-loss)."
        )
    return values


def _cell_frame(plan: CellPlan, dataset, rows: list[tuple]) -> pd.DataFrame:
    """The cell's rows (fold, metric, value, fit seconds, params, fitted) with its labels."""
    labels = {
        **plan.labels(),
        "dataset": dataset.name,
        "classifier": getattr(dataset, "classifier_name", "none"),
        "calbench_version": calbench.__version__,
    }
    # One constructor call: a column added at a time costs a sweep's cell 3 ms.
    names = ("fold", "metric", "value", "fit_seconds", "params", "fitted")
    columns = {n: list(c) for n, c in zip(names, zip(*rows, strict=True), strict=True)}
    frame = pd.DataFrame({**columns, **labels})
    # What the cell ran on, for the report's data-set table (a user's file has no registry
    # entry that says it): kept beside the cell, not in its identity.
    if hasattr(dataset, "y_cal"):  # scores; a classifier protocol's features have no split
        frame.attrs["shape"] = {
            "classes": int(dataset.n_classes),
            "calibration_rows": len(dataset.y_cal),
            "test_rows": len(dataset.y_test),
        }
    return frame
