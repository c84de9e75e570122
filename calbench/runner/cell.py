"""One cell of an experiment: a data set, a method and its settings -> tidy result rows."""

from __future__ import annotations

import functools
import inspect
import json
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from sklearn.model_selection import ParameterGrid

import calbench
from calbench.calibrators import make_calibrator
from calbench.criteria import PARAMETRISED
from calbench.data import LOADERS, Dataset, load_dataset
from calbench.decision.family import between
from calbench.errors import CalbenchError
from calbench.metrics import empirical_risk, log_loss
from calbench.runner.checks import method_grid
from calbench.runner.decision_task import DecisionTask, configured_loss, decision_task
from calbench.runner.predictions import FoldPredictions
from calbench.runner.protocols import make_folds
from calbench.runner.selection import select_and_fit, select_on_validation
from calbench.simplex import map_points, probs_to_logits, softmax

#: The parts of the configuration that determine a cell's numbers (and so its hash).
CELL_KEYS = (
    "experiment",
    "seed",
    "dataset",
    "method",
    "criterion",
    "loss",
    "shift",
    "protocol",
    "metrics",
)


def cell_config(cfg: DictConfig) -> dict:
    resolved = OmegaConf.to_container(cfg, resolve=True)  # once, not once per key
    cell = {key: resolved[key] for key in CELL_KEYS}
    method = cell["method"]
    calibrator = make_calibrator(method["calibrator"], **(method.get("params") or {}))
    if not _criterion_keys(calibrator, method):
        # The criterion cannot change this method's numbers: a sweep over criteria runs
        # it once (the other points find it in the store) and labels it "none".
        cell["criterion"] = {"name": "none"}
    return cell


def _criterion_keys(calibrator, method: dict) -> list[str]:
    """The calibrator parameters the run's criterion sets (those its steps declare, see
    `Calibrator.run_inputs`); a criterion the method's own YAML fixes (ETS and IROvA-TS fit
    on the MSE) is kept."""
    fixed = method.get("params") or {}
    return [k for k in calibrator.run_input_keys("criterion") if k not in fixed]


def _loader_options(loader: str):
    return inspect.signature(LOADERS[loader]).parameters if loader in LOADERS else {}


def load_configured_dataset(cfg: DictConfig) -> Dataset:
    options = OmegaConf.to_container(cfg.dataset, resolve=True)
    registry = options.pop("registry", None) or {}
    loader = options.pop("loader")
    files = registry.get("files") or []
    if len(files) == 1 and files[0].get("sha256") and "sha256" in _loader_options(loader):
        options["sha256"] = files[0]["sha256"]  # a registered set's file must be the published one
    display_name = options.pop("name", None)
    takes_name = "name" in _loader_options(loader)
    if display_name and takes_name:
        options["name"] = display_name  # the loader names its cache files by it
    dataset = load_dataset(loader, **options)
    if display_name:
        dataset.name = display_name
    return dataset


def criterion_spec(cfg: DictConfig, n_classes: int, task: DecisionTask | None = None, eps=None):
    """What the calibrator minimises: a criterion name, or for the decision criteria a dict
    with their options and loss matrices (``direct``: the run's loss at ``eps``, see
    `DecisionTask.training_loss`; ``integral``: the family from the criterion's own
    ``eps0``/``eps1`` loss configs, else the run's loss family or prior shift)."""
    options = OmegaConf.to_container(cfg.criterion, resolve=True)
    options.pop("grid", None)  # the criterion's own hyperparameters, see `criterion_grid`
    options.pop("select_by", None)  # how inner CV rates them, see `selection_score`
    name = options.pop("name")
    if name in PARAMETRISED and cfg.get("device", "cpu") != "cpu":
        options["device"] = cfg.device  # torch-written criteria compute there
    if name not in ("direct", "integral"):
        return {"name": name, **options} if options else name
    task = task or decision_task(cfg, None, n_classes)
    if name == "direct":
        return {"name": name, "loss_matrix": task.training_loss(eps).tolist(), **options}
    ends = [options.get(k) for k in ("eps0", "eps1")]
    if all(end is not None for end in ends):
        family = between(*(configured_loss(end, n_classes)[0] for end in ends))
    elif task.family is not None:
        family = task.family
    else:
        raise CalbenchError(
            "criterion integral needs a loss family: run it with a family loss (e.g. "
            "loss=reject_cost_family) or a shift (shift=lt_k1), or give criterion.eps0 and "
            "criterion.eps1 as loss configs."
        )
    return {"name": name, "l0": family.l0.tolist(), "l1": family.l1.tolist()}


def criterion_grid(cfg: DictConfig, spec, keys) -> dict:
    """A criterion config's ``grid:`` (Ho 3.6 searches the Direct Loss's lambda and beta) as
    grid points of the calibrator's ``criterion`` parameter: one full spec per combination."""
    options = OmegaConf.to_container(cfg.criterion, resolve=True).get("grid") or {}
    if not options:
        return {}
    if not isinstance(spec, dict):
        spec = {"name": spec}
    variants = [dict(spec, **point) for point in ParameterGrid(options)]
    return {key: variants for key in keys}


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


def build_calibrator(cfg: DictConfig, dataset: Dataset, task: DecisionTask | None = None, eps=None):
    """The method's calibrator with its fixed params, the criterion (for the decision
    ``task`` at ``eps``; default: the run's fold-free loss), and its grid."""
    method = OmegaConf.to_container(cfg.method, resolve=True)
    params = dict(method.get("params") or {})
    calibrator = make_calibrator(method["calibrator"], **params)
    accepted = calibrator.get_params()
    # Hand the criterion (and the known true map) to every step that takes one, nested
    # steps of a composition included.
    criterion_keys = _criterion_keys(calibrator, method)
    if criterion_keys:
        spec = criterion_spec(cfg, dataset.n_classes, task, eps)
        calibrator.set_params(**{k: spec for k in criterion_keys})
    calibrator.set_params(
        **{k: dataset.true_map for k in calibrator.run_input_keys("true_map")},
        **{k: cfg.get("device", "cpu") for k in calibrator.run_input_keys("device")},
    )
    criterion = cfg.criterion.name if criterion_keys else "none"
    grid = method_grid(method)
    if criterion_keys:
        grid.update(criterion_grid(cfg, spec, criterion_keys))
    unknown = sorted(set(grid) - set(accepted))
    if unknown:
        raise CalbenchError(
            f"method {method['name']!r}: grid names unknown parameter(s) {unknown}; "
            f"the calibrator takes {sorted(accepted)}."
        )
    return calibrator, grid, criterion


def selection_score(cfg: DictConfig, loss_matrix, log_loss_clip=None):
    """How inner CV rates a grid point: log-loss (``log_loss_clip`` as `log_loss`'s
    ``clip``), or with ``criterion.select_by: empirical_risk`` the mean cost of the Bayes
    decisions under ``loss_matrix``."""
    if cfg.criterion.get("select_by", "log_loss") != "empirical_risk":
        return functools.partial(log_loss, clip=log_loss_clip)
    return lambda probs, y: empirical_risk(probs, y, loss_matrix=loss_matrix)


def fit_selected(cfg: DictConfig, calibrator, grid, logits, y, score=None):
    """The protocol's hyperparameter choice and fit: (fitted model, chosen params).
    ``score`` rates grid points (default: as `selection_score` says for the run's loss)."""
    if score is None:
        score = selection_score(cfg, decision_task(cfg, None, logits.shape[1]).loss)
    return select_and_fit(
        calibrator,
        grid,
        logits,
        y,
        inner_folds=cfg.protocol.inner_folds,
        average_inner_models=cfg.protocol.average_inner_models,
        seed=cfg.seed,
        score=score,
        inner_cv=cfg.protocol.get("inner_cv", "stratified"),
    )


def _check_simplex(cfg, dataset, fold, probs):
    drift = np.abs(probs.sum(axis=1) - 1).max()
    if not np.isfinite(probs).all() or drift > 1e-6 or (probs < 0).any():
        raise CalbenchError(
            f"method {cfg.method.name!r} produced predictions off the probability simplex "
            f"on {dataset.name} fold {fold.index} (max row-sum error {drift:.3g}); "
            "this is a bug in the calibrator, please report it."
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


def _fit_fold(cfg, dataset, task, fold, eps=None) -> tuple[FoldFit, str]:
    """Fit one calibrator per member for the decision ``task`` at ``eps``."""
    calibrator, grid, criterion = build_calibrator(cfg, dataset, task, eps)
    score = selection_score(cfg, task.training_loss(eps))
    # A classifier's scores on its own training part are often exactly 0 or 1 (trees,
    # forests, k-NN), so there the log-loss is clipped as scikit-learn's was in Kull et
    # al.'s code, lest a few 708-per-sample terms decide the choice.
    on_training = selection_score(cfg, task.training_loss(eps), log_loss_clip=1e-15)
    probs, uncalibrated, simplex, chosen, seconds = [], [], [], [], 0.0
    for member in fold.members:
        start = time.perf_counter()
        if member.logits_val is None:
            model, params = fit_selected(
                cfg, calibrator, grid, member.logits_fit, member.y_fit, score=score
            )
        else:
            model, params = select_on_validation(
                calibrator,
                grid,
                member.logits_fit,
                member.y_fit,
                member.logits_val,
                member.y_val,
                score=on_training,
            )
        seconds += time.perf_counter() - start
        probs.append(model.predict_proba(member.logits_eval))
        uncalibrated.append(softmax(member.logits_eval))
        if dataset.n_classes == 3:  # what a simplex map draws, so figures never refit
            simplex.append(model.predict_proba(probs_to_logits(map_points())))
        chosen.append(public_params(params, model))
    fit = FoldFit(
        _combine(probs),
        _combine(uncalibrated),
        chosen[0] if len(chosen) == 1 else chosen,
        seconds,
        _combine(simplex) if simplex else None,
    )
    return fit, criterion


def _combine(parts: list[np.ndarray]) -> np.ndarray:
    """A fold's members' predictions, averaged (Kull 4.1)."""
    return parts[0] if len(parts) == 1 else np.mean(parts, axis=0)


def _fold_predictions(dataset, task, fold, fit) -> FoldPredictions:
    true_probs = dataset.true_map(fit.uncalibrated) if dataset.true_map is not None else None
    train, test = task.priors if task.priors is not None else (None, None)
    return FoldPredictions(
        fold=fold.index,
        y=fold.y_eval,
        probs=fit.probs,
        uncalibrated=fit.uncalibrated,
        loss=task.loss,
        true_probs=true_probs,
        prior_train=train,
        prior_test=test,
        simplex=fit.simplex,
    )


def run_cell(cfg: DictConfig) -> pd.DataFrame:
    """Fit and evaluate the configured method on every fold of the protocol: its rows."""
    return evaluate_cell(cfg)[0]


def evaluate_cell(cfg: DictConfig) -> tuple[pd.DataFrame, list[FoldPredictions]]:
    """The cell's rows and each fold's stored predictions (`calbench.runner.predictions`)."""
    dataset = load_configured_dataset(cfg)
    protocol = OmegaConf.to_container(cfg.protocol, resolve=True)
    metrics_config = OmegaConf.to_container(cfg.metrics, resolve=True)

    rows, stored = [], []
    for fold in make_folds(dataset, protocol, seed=cfg.seed):
        task = decision_task(cfg, fold, dataset.n_classes)
        fit, criterion = _fit_fold(cfg, dataset, task, fold)
        _check_simplex(cfg, dataset, fold, fit.probs)
        predictions = _fold_predictions(dataset, task, fold, fit)
        values = predictions.scores(metrics_config)
        # The model's own accuracy where the calibrator was fitted (Hoki's "Val Acc.").
        values["fit_accuracy"] = float(
            np.mean([(m.logits_fit.argmax(axis=1) == m.y_fit).mean() for m in fold.members])
        )
        if criterion == "direct" and task.curve:
            # Trained knowing eps (Ho 4.4): one fit per point, each scored at its own eps.
            for eps in task.direct_points:
                at_eps = fit if eps == task.eps else _fit_fold(cfg, dataset, task, fold, eps)[0]
                values.update(task.curve_values(at_eps.probs, fold.y_eval, [eps]))
        else:
            values.update(task.curve_values(fit.probs, fold.y_eval))
        bad = sorted(m for m, v in values.items() if not np.isfinite(v))
        if bad:
            raise CalbenchError(
                f"method {cfg.method.name!r} on {dataset.name} fold {fold.index} gave non-finite "
                f"{bad}; nothing was stored. Check the method's settings (e.g. a cropping "
                "epsilon of 0 lets a zero probability reach the log-loss)."
            )
        stored.append(predictions)
        for metric, value in values.items():
            rows.append(
                {
                    "fold": fold.index,
                    "metric": metric,
                    "value": value,
                    "fit_seconds": fit.seconds,
                    "params": json.dumps(fit.chosen, sort_keys=True),
                }
            )
    frame = pd.DataFrame(rows)
    labels = {
        "experiment": cfg.experiment,
        "dataset": dataset.name,
        "classifier": getattr(dataset, "classifier_name", "none"),
        "method": cfg.method.name,
        "criterion": criterion,
        "loss": cfg.loss.name,
        "shift": cfg.shift.name,
        "protocol": protocol["name"],
        "seed": cfg.seed,
        "calbench_version": calbench.__version__,
    }
    for column, value in labels.items():
        frame[column] = value
    return frame, stored


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over folds, one line per metric."""
    grouped = rows.groupby("metric", sort=False)["value"]
    return pd.DataFrame(
        {"mean": grouped.mean(), "std": grouped.std(ddof=1), "folds": grouped.size()}
    )
