"""Gradient-boosted trees on ``ln p`` (CalArena's XGBoost, LightGBM and CatBoost calibrators,
probmetrics' ``*Calibrator(use_cv=True)``)."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedKFold

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import Choice
from calbench.calibrators.float32 import (
    LOG_TINY32,
    calarena_log_probabilities,
    calarena_probabilities,
)
from calbench.calibrators.optional import optional_module
from calbench.errors import CalbenchError


class BoostedCalibrator(Calibrator):
    """Gradient-boosted trees on ``ln p`` (CalArena's XGBoost, LightGBM and CatBoost
    calibrators, probmetrics' ``*Calibrator(use_cv=True)``): depth 3 (LightGBM 8 leaves),
    five stratified folds (shuffled, seed 42), each model early-stopped after 50 rounds
    without gain on its held-out fold; predictions are the five models' mean.

    Parameters
    ----------
    library : {"xgboost", "lightgbm", "catboost"}
    n_folds : int
    seed : int
        Seed of the fold split (CalArena: 42).
    binary_feature : {"log_odds", "log_probabilities"}
        A two-class task's feature: ``log_odds``, class 1's ``ln p - ln(1 - p)`` in float32,
        each log clipped at ±ln(float32 tiny), one column, as probmetrics'
        ``binary_probs_to_logits`` gives its trees (CalArena's cv-binary Brier on
        DenseNet-40: LightGBM 0.017217, CatBoost 0.016961, XGBoost 0.017833, as printed);
        ``log_probabilities``, both classes' ``ln p`` as on more classes (calbench before
        2026-11-28: 0.017206, 0.017023, 0.017871).
    """

    input_kind = "probabilities"
    _parameter_constraints = {
        "library": Choice("xgboost", "lightgbm", "catboost"),
        "binary_feature": Choice("log_odds", "log_probabilities"),
    }

    def __init__(self, library="xgboost", n_folds=5, seed=42, binary_feature="log_odds"):
        self.library = library
        self.n_folds = n_folds
        self.seed = seed
        self.binary_feature = binary_feature

    def _features(self, logits):
        if np.shape(logits)[1] != 2 or self.binary_feature == "log_probabilities":
            return calarena_log_probabilities(logits)
        p = calarena_probabilities(logits)[:, 1].astype(np.float32)
        bound = np.float64(-LOG_TINY32)  # float64, as numpy's own scalar there: the logs
        with np.errstate(divide="ignore"):  # are float32, their clip and difference not
            log_p = np.clip(np.log(p), -bound, bound)
            log_rest = np.clip(np.log1p(-p), -bound, bound)
        return (log_p - log_rest)[:, None]

    def _fit(self, logits, y):
        module = optional_module(self.library)
        x = self._features(logits)
        self.observed_ = np.unique(y)
        code = np.searchsorted(self.observed_, y)
        rarest = int(np.bincount(code).min())
        if rarest < int(self.n_folds):
            raise CalbenchError(
                f"{type(self).__name__} ({self.library}) early-stops each of its "
                f"{int(self.n_folds)} stratified folds on held-out rows of every class; the "
                f"rarest class here has {rarest} row(s). Give it at least {int(self.n_folds)} "
                "rows of each class, or lower n_folds."
            )
        folds = StratifiedKFold(int(self.n_folds), shuffle=True, random_state=int(self.seed))
        train = getattr(self, f"_train_{self.library}")
        self.models_ = [
            train(module, x[fit], code[fit], x[held], code[held])
            for fit, held in folds.split(x, code)
        ]

    def _train_xgboost(self, xgb, x, y, x_val, y_val):
        k = len(self.observed_)
        params = {"max_depth": 3}
        if k > 2:
            params.update(objective="multi:softprob", eval_metric="mlogloss", num_class=k)
        else:
            params.update(objective="binary:logistic", eval_metric="logloss")
        return xgb.train(
            params,
            xgb.DMatrix(x, label=y),
            evals=[(xgb.DMatrix(x_val, label=y_val), "eval")],
            early_stopping_rounds=50,
            verbose_eval=False,
        )

    def _train_lightgbm(self, lgb, x, y, x_val, y_val):
        k = len(self.observed_)
        params = {"max_depth": 3, "num_leaves": 8, "verbose": -1}
        if k > 2:
            params.update(objective="multiclass", metric="multi_logloss", num_class=k)
        else:
            params.update(objective="binary", metric="binary_logloss")
        data = lgb.Dataset(x, label=y)
        return lgb.train(
            params,
            data,
            valid_sets=[lgb.Dataset(x_val, label=y_val, reference=data)],
            callbacks=[lgb.early_stopping(stopping_rounds=50, verbose=False)],
        )

    def _train_catboost(self, cb, x, y, x_val, y_val):
        model = cb.CatBoostClassifier(
            depth=3,
            loss_function="MultiClass" if len(self.observed_) > 2 else "Logloss",
            iterations=1000,
            early_stopping_rounds=50,
            verbose=False,
            allow_writing_files=False,
        )
        return model.fit(cb.Pool(x, label=y), eval_set=cb.Pool(x_val, label=y_val))

    def _predict_fold(self, model, x):
        if self.library == "xgboost":
            out = model.predict(optional_module("xgboost").DMatrix(x))
        elif self.library == "lightgbm":
            out = model.predict(x)
        else:
            out = model.predict_proba(x)
        return np.column_stack([1 - out, out]) if out.ndim == 1 else out

    def _predict_proba(self, logits):
        x = self._features(logits)
        mean = np.mean([self._predict_fold(m, x) for m in self.models_], axis=0)
        out = np.zeros((len(x), self.n_classes_))
        out[:, self.observed_] = mean
        return out / out.sum(axis=1, keepdims=True)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "xgboost": (BoostedCalibrator, {"library": "xgboost"}),
    "lightgbm": (BoostedCalibrator, {"library": "lightgbm"}),
    "catboost": (BoostedCalibrator, {"library": "catboost"}),
}
