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
from calbench.device import reuse_transfers
from calbench.errors import check_choice
from calbench.metrics import log_loss
from calbench.runner.grid import edge_points, grid_path
from calbench.runner.progress import GridProgress
from calbench.runner.protocols import INNER_CV, check_class_counts
from calbench.validation import scores_checked_once, trust_scores

#: Inner folds are sliced once a search, not once a grid point (`_InnerCV`), where their
#: copies (about the data's size per fold) stay under this many bytes: at ImageNet shape (25,000 x
#: 1,000) a 36-point grid over 5 folds otherwise copies 160 MB 180 times.
FOLD_CACHE_BYTES = 2e9


class AveragedCalibrator(Calibrator):
    """Averages the probabilities of already fitted calibrators (Kull's inner-model ensemble)."""

    def __init__(self, members=()):
        self.members = members

    def _fit(self, logits, y):
        pass

    def _predict_proba(self, logits):
        return np.mean([m.predict_proba(logits) for m in self.members], axis=0)


def runs_inner_cv(grid: dict | None, average_inner_models: bool) -> bool:
    """Whether `select_and_fit` splits the data: a grid to search, or fold models to
    average; one point alone is fitted on all of it."""
    return len(grid_path(grid)) > 1 or average_inner_models


def inner_splits(y: np.ndarray, inner_folds: int, inner_cv: str, seed: int) -> list:
    """The (train, test) index pairs of the inner CV (they depend on the labels alone)."""
    splitter = StratifiedKFold if inner_cv == "stratified" else KFold
    return list(splitter(inner_folds, shuffle=True, random_state=seed).split(y, y))


def classes_left_out(y: np.ndarray, splits: list) -> int:
    """How many (inner fold, class) pairs leave a class of ``y`` out of the inner training
    part: a calibrator fitted there has never seen that class (unstratified inner CV, or
    a class rarer than the folds)."""
    present = np.unique(y)
    return int(sum(len(np.setdiff1d(present, y[train])) for train, _ in splits))


# A GPU-fitted calibrator sends each fold's arrays there once for the whole search, and
# each fold's arrays are checked once (`trust_scores`).
@reuse_transfers()
@scores_checked_once()
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
    grid_patience: int | None = None,
    widen_edges: int = 0,
) -> tuple[Calibrator, dict]:
    """Fit ``calibrator`` on (logits, y), its grid chosen by inner CV.

    ``score(probs, y)`` (lower is better) rates the pooled out-of-fold predictions of each
    grid point: the log-loss unless the criterion asks for another (Ho 3.6 picks the Direct
    Loss's lambda by the empirical risk). ``grid_patience`` (None: the whole grid, as the
    papers) visits the rows of the grid's first key from the strongest penalty down
    (`grid_path`) and stops after that many rows in a row found no better point; the
    choice can then differ from the full grid's. On a 2000 x 100 ms_odir grid (36 points,
    5 inner folds) patience 1 fitted 61 of 181 models, 14.7 s against 40.7 s, the same
    choice.

    ``widen_edges`` (0: the grid as given, as the papers search it) extends a numeric key
    whose chosen value lies at the grid's edge by one more step of the grid's own spacing
    beyond it (1000 after 100 gives 10000; every value of the other keys), rates the new
    points and chooses again, up to that many times: a choice at the edge says the grid
    stopped short (netcal's DenseNet-BC-100 CIFAR-100: ms_odir chose reg_lambda = 1000, held-out
    log-loss 0.8938 against TS's 0.8831; at 10000 it is 0.8719).

    Returns the fitted predictor and the chosen parameters (empty without a grid).
    """
    # Warm starts walk the grid from the strongest penalty down (`_fold_fitter`).
    warm = "warm_start" in calibrator.run_input_keys("warm_start")  # not a step's
    points = grid_path(grid, strongest_first=grid_patience is not None or warm)
    if not runs_inner_cv(grid, average_inner_models):
        return clone(calibrator).set_params(**points[0]).fit(logits, y), points[0]
    check_choice(inner_cv, "inner_cv", "protocol", INNER_CV)
    if inner_cv == "stratified":  # unstratified folds may leave a class out (counted)
        check_class_counts(y, logits.shape[1], inner_folds, "calibration data (inner CV)")
    splits = inner_splits(y, inner_folds, inner_cv, seed)
    prefix = _prefix_key(calibrator, grid)
    fit_point = _fold_fitter(calibrator, points, splits, logits, y, prefix, warm)
    search = _InnerCV(fit_point, logits, y, splits, score, keep_copies=warm)
    # Equal scores go to the earlier point of scikit-learn's ParameterGrid order, whatever
    # the path visits first.
    listed = list(ParameterGrid(grid)) if grid else [{}]
    best = _search_path(search, points, [listed.index(p) for p in points], grid_patience)
    if fit_point.refits_each_point:
        best = _widen(search, grid, best, widen_edges, len(listed))
    _, params, models, _ = best
    if average_inner_models:
        return AveragedCalibrator(members=models).fit(logits, y), params
    return clone(calibrator).set_params(**params).fit(logits, y), params


def _fold_fitter(calibrator, points, splits, logits, y, prefix, warm):
    """``fit_point(i, j, params, fit_logits, fit_y)``: the model of the i-th visited grid
    point ``params`` on inner fold j, made one of four ways (its ``refits_each_point`` says
    whether a point outside ``points`` can be fitted too):

    - a calibrator that trains a whole grid as one batch (``fit_grid``, the Keras-style
      layers) fits every point of an inner fold at once (``fit_grid_folds``: of every
      inner fold at once); the choice and the kept models are as one by one;
    - a grid over one prefix parameter (`Calibrator.prefix_params`) is one fit per inner
      fold, at its largest value, whose truncated copies are the other points;
    - a calibrator that can warm-start keeps one model per inner fold, each fit starting
      from the previous point's solution (the same optimum, fewer steps); the grid is then
      walked from the strongest penalty down, so a weak penalty's fit starts from a near
      one's solution (netcal's LeNet-5 CIFAR-100, ms_odir, one inner fold of the 36-point
      grid: 36 s against 63 s weakest first; DenseNet-BC-100: 10 s against 21 s);
    - any other is fitted afresh for each point.
    """
    if getattr(calibrator, "fit_grid_folds", None) is not None:
        batches = calibrator.fit_grid_folds(logits, y, [f for f, _ in splits], points)
    elif getattr(calibrator, "fit_grid", None) is not None:
        batches = [calibrator.fit_grid(logits[f], y[f], points) for f, _ in splits]
    if getattr(calibrator, "fit_grid", None) is not None:

        def fit_point(i, j, params, fit_logits, fit_y):
            return batches[j][i]

        fit_point.refits_each_point = False
        return fit_point
    if prefix is not None:
        longest = [_fit_longest(calibrator, prefix, points, logits[f], y[f]) for f, _ in splits]

        def fit_point(i, j, params, fit_logits, fit_y):
            return longest[j].truncated(prefix, params[prefix])

        fit_point.refits_each_point = False
        return fit_point
    if warm:
        runners = [clone(calibrator).set_params(warm_start=True) for _ in splits]

        def fit_point(i, j, params, fit_logits, fit_y):
            return runners[j].set_params(**params).fit(fit_logits, fit_y)
    else:

        def fit_point(i, j, params, fit_logits, fit_y):
            return clone(calibrator).set_params(**params).fit(fit_logits, fit_y)

    fit_point.refits_each_point = True
    return fit_point


class _InnerCV:
    """The inner folds of one search: each grid point's pooled out-of-fold score.

    The folds' slices are taken once a search, not once a grid point, where their copies
    stay under `FOLD_CACHE_BYTES`, and checked once (`trust_scores`). One buffer holds every
    point's held-out predictions (the folds cover each row once): a new one per point costs
    its pages' first writes (ImageNet shape: 200 MB, 0.1 s)."""

    def __init__(self, fit_point, logits, y, splits, score, keep_copies: bool):
        self.fit_point, self.logits, self.y, self.splits = fit_point, logits, y, splits
        self.score, self.keep_copies = score, keep_copies
        self.progress = None  # set by `count` before each run of points
        cached = logits.nbytes * len(splits) <= FOLD_CACHE_BYTES
        self.parts = [_fold_part(logits, y, split) for split in splits] if cached else None
        if cached:  # the search's own slices, unchanged while it lasts
            trust_scores(*(a for part in self.parts for a in part[::2]), where="select_and_fit")
        self.out_of_fold = np.empty((len(y), logits.shape[1]))

    def count(self, n_points: int) -> None:
        """Report progress over the next ``n_points`` grid points."""
        self.progress = GridProgress(n_points, len(self.splits))

    def rate(self, i: int, params: dict) -> tuple[float, list]:
        """The pooled out-of-fold score of grid point ``params`` (the i-th visited), and its
        inner models (copies where the fold's model goes on to the next point)."""
        models = []
        for j, split in enumerate(self.splits):
            if self.parts is not None:
                fit_logits, fit_y, held_logits = self.parts[j]
            else:
                fit_logits, fit_y, held_logits = _fold_part(self.logits, self.y, split)
            model = self.fit_point(i, j, params, fit_logits, fit_y)
            self.out_of_fold[split[1]] = model.predict_proba(held_logits)
            models.append(copy.deepcopy(model) if self.keep_copies else model)
            self.progress.fitted(i, j)
        return self.score(self.out_of_fold, self.y), models


def _search_path(search: _InnerCV, points: list[dict], grid_order: list[int], patience):
    """(score, params, inner models, grid order) of the best point of ``points``, visited
    in order; with ``patience`` (see `select_and_fit`) the search stops after that many
    rows of the first key in a row found no better point."""
    best = (np.inf, None, None, len(points))
    row_key = next(iter(points[0]), None)
    best_before_row, stale_rows = np.inf, 0
    search.count(len(points))
    for i, params in enumerate(points):
        if patience is not None and i and params[row_key] != points[i - 1][row_key]:
            stale_rows = 0 if best[0] < best_before_row else stale_rows + 1
            if stale_rows >= patience:
                break
            best_before_row = best[0]
        value, models = search.rate(i, params)
        if (value, grid_order[i]) < (best[0], best[3]):
            best = (value, params, models, grid_order[i])
    return best


def _widen(search: _InnerCV, grid: dict | None, best: tuple, widen_edges: int, n_listed: int):
    """``best`` after up to ``widen_edges`` rounds of rating the points one grid step beyond
    the edge the choice lies at (`edge_points`); a new point wins only by a strictly
    better score."""
    widened = dict(grid or {})
    for _ in range(widen_edges):
        extra = edge_points(widened, best[1])
        if not extra:
            break
        search.count(len(extra))
        for i, params in enumerate(extra):
            value, models = search.rate(i, params)
            if value < best[0]:
                best = (value, params, models, n_listed + i)
        for point in extra:
            for key, value in point.items():
                if value not in widened[key]:
                    widened[key] = sorted([*widened[key], value])
    return best


def _fold_part(logits, y, split):
    """(fitting logits, fitting labels, held-out logits) of one inner fold."""
    fit_idx, held_idx = split
    return logits[fit_idx], y[fit_idx], logits[held_idx]


def _prefix_key(calibrator: Calibrator, grid: dict) -> str | None:
    """The grid's one key, where it is a prefix parameter (`Calibrator.prefix_params`)."""
    if grid and len(grid) == 1 and next(iter(grid)) in calibrator.prefix_keys():
        return next(iter(grid))
    return None


def _fit_longest(calibrator: Calibrator, prefix: str, points: list[dict], logits, y):
    """The calibrator fitted at the grid's largest value of its prefix parameter, whose
    `Calibrator.truncated` copies are the other points."""
    longest = {prefix: max(point[prefix] for point in points)}
    return clone(calibrator).set_params(**longest).fit(logits, y)


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
    prefix = _prefix_key(calibrator, grid)
    if prefix is not None:  # one fit at the largest value, the others its prefixes
        runner = _fit_longest(calibrator, prefix, points, logits, y)
        models = [runner.truncated(prefix, point[prefix]) for point in points]
    else:
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
