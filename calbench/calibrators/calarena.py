"""CalArena's multiclass calibrators (probkit/CalArena ``run_benchmark.py``, built on
probmetrics 1.3), each with its source's definition, where calbench's paper variants differ.

CalArena hands every calibrator float32 probabilities ``p``; methods on logits use
``max(ln p, ln 1.18e-38)`` (probmetrics' ``CategoricalProbs.get_logits``: the smallest
normal float32). `calarena_log_probabilities` is that input; ``dataset.float32_probabilities``
makes a data set's logits exactly it, so calbench's own TS, VS and MS fit what CalArena's fit.

- `PriorFallbackBinning`: probmetrics' ``BinaryHistogramBinningCalibrator`` one-vs-rest (10
  bins; an empty bin predicts the class's frequency, not its mid-point; Kull's and Valk's
  binning differ in both).
- `CenteredIsotonic`: Oron and Flournoy's centred isotonic regression (cir_model's
  construction), one-vs-rest.
- `DirichletKernel`: Popordanoska et al.'s Dirichlet kernel as a Nadaraya-Watson estimate of
  the label (not Valk's correction of ``p``), Scott's bandwidth ``n^(-2/(k+3))``.
- `BoostedCalibrator`: XGBoost, LightGBM or CatBoost on ``ln p``, depth 3, five stratified
  folds each early-stopped on its held-out fold, the five models averaged.
- `LucenaSpline` and `NetcalBBQ`: Lucena's spline (splinecalib) and Naeini et al.'s BBQ
  (netcal), the packages CalArena calls.
- `StoredIsotonic` and `StoredVennAbers`: isotonic regression and Venn-Abers on the stored
  float32 scores, whose ties pool as scikit-learn and the venn-abers package pool them.
- `Float32MatrixScaling` and `Float32StructuredMatrixScaling`: CalArena's MS and SMS,
  torchmin's float32 BFGS runs, which stop short of the optimum calbench's `dir` and `sms`
  reach.
- `LogProbabilityVectorScaling` (VS on ``ln p``) and `SummedODIR` (dirichletcal's ODIR
  penalty, not averaged over the weights).

One-vs-rest outputs are clipped at 1e-30 and renormalised, as probmetrics'
``MulticlassOneVsRestCalibrator``.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings

import numpy as np
from scipy.special import gammaln
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import StratifiedKFold

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import (
    OneVsRestCalibrator,
    binary_columns,
    class_probabilities,
)
from calbench.calibrators.constraints import POSITIVE, AutoOr, Choice
from calbench.errors import CalbenchError
from calbench.simplex import float32_softmax

#: ln of the smallest normal float32: probmetrics' floor on ln p.
TINY32 = float(np.finfo(np.float32).tiny)
LOG_TINY32 = float(np.log(TINY32))

#: The optional packages CalArena's methods call (the calarena extra): import name -> pip name.
_OPTIONAL = {
    "xgboost": "xgboost-cpu",
    "lightgbm": "lightgbm",
    "catboost": "catboost",
    "splinecalib": "splinecalib",
    "netcal": "netcal",
    "torchmin": "pytorch-minimize",
    "betacal": "betacal",
}


def optional_module(name: str):
    """Import one of CalArena's optional packages, or one error saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise CalbenchError(
            f"This method needs the {name!r} package, which calbench installs only with its "
            f"CalArena extra: pip install 'calbench[calarena]' (or pip install "
            f"{_OPTIONAL[name]}); `make install` includes it."
        ) from None


@contextlib.contextmanager
def _quiet_tqdm(module):
    """``module``'s tqdm progress bars off for the duration (netcal's BBQ draws one per
    class; a sweep reports its own progress)."""
    before = module.tqdm
    module.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        module.tqdm = before


def calarena_probabilities(logits: np.ndarray) -> np.ndarray:
    """The float32 probabilities CalArena's methods are given. Logits whose rows are already
    log-probabilities (a data set read with ``float32_probabilities``, or given as
    probabilities) are exponentiated without renormalising, so float32 probabilities come
    back bit for bit; other logits take CalArena's float32 softmax."""
    z = np.asarray(logits, dtype=np.float64)
    if np.all(z <= 0.0):
        with np.errstate(under="ignore"):
            p = np.exp(z)
        if np.all(np.abs(p.sum(axis=1) - 1.0) < 1e-5):
            return p.astype(np.float32)
    return float32_softmax(z)


def calarena_log_probabilities(logits: np.ndarray, engine: str = "numpy") -> np.ndarray:
    """What CalArena's methods on logits see: ``ln p`` of `calarena_probabilities` in
    float32, floored at the smallest normal float32's log. probmetrics takes that log with
    numpy for its boosting calibrators (``multiclass_probs_to_logits``) and with torch for
    the others (``CategoricalProbs.get_logits``); the two float32 logs differ in the last
    bit for about 2% of DenseNet-40's entries, enough to move a float32 BFGS run."""
    p = calarena_probabilities(logits)
    if engine == "torch":
        import torch

        log_p = torch.log(torch.from_numpy(p)).numpy()
    else:
        with np.errstate(divide="ignore"):
            log_p = np.log(p)
    return np.maximum(log_p, np.float32(LOG_TINY32))


def _clipped_rows(out: np.ndarray, floor: float = 1e-30) -> np.ndarray:
    out = np.clip(out, floor, None)
    return out / out.sum(axis=1, keepdims=True)


class _OneVsRestFloor(OneVsRestCalibrator):
    """probmetrics' one-vs-rest combination: each column clipped at 1e-30, rows renormalised
    (calbench's `OneVsRestCalibrator` makes an all-zero row uniform instead). On a
    two-class task CalArena runs the binary map itself, with no clip: a run or bin of one
    label predicts exactly 0 or 1, which its float32 metrics price at ln(float32 tiny). The
    floor there is float32's tiny, so every metric equals CalArena's and calbench's own
    log-loss stays finite (a certain miss costs 87.3, where 1e-30 made it 69.1: CIR's
    cv-binary log-loss on DenseNet-40, 0.038039 against CalArena's 0.039865, one test row).
    Subclasses take that floor as their parameter ``two_class_floor``."""

    # A bin or run of one label predicts 0 or 1; the 1e-30 floor leaves 1 - 9e-30.
    _certainty = "possible"

    def _scores(self, logits):
        return calarena_probabilities(logits).astype(np.float64)

    def _predict_proba(self, logits):
        out = self._binary_outputs(self._scores(logits))
        return _clipped_rows(out, self.two_class_floor if out.shape[1] == 2 else 1e-30)


class PriorFallbackBinning(_OneVsRestFloor):
    """Histogram binning as probmetrics' ``BinaryHistogramBinningCalibrator``, one-vs-rest.

    ``strategy="uniform"``: edges ``linspace(0, 1, n_bins + 1)``; ``"quantile"``: the
    distinct quantiles of the class's calibration scores at those levels. A score falls in
    ``digitize(score, edges) - 1`` clipped to the bins (right-open bins, 1.0 in the last);
    an empty bin predicts the class's calibration frequency.

    Parameters
    ----------
    n_bins : int
    strategy : {"uniform", "quantile"}
    two_class_floor : float
        A two-class task's floor (see `_OneVsRestFloor`; 1e-30 before 2026-11-28).
    """

    _parameter_constraints = {"strategy": Choice("uniform", "quantile")}

    def __init__(self, n_bins=10, strategy="uniform", two_class_floor=TINY32):
        self.n_bins = n_bins
        self.strategy = strategy
        self.two_class_floor = two_class_floor

    def _fit_binary(self, scores, outcomes):
        n_bins = int(self.n_bins)
        if self.strategy == "uniform":
            edges = np.linspace(0.0, 1.0, n_bins + 1)
        else:
            edges = np.unique(np.quantile(scores, np.linspace(0.0, 1.0, n_bins + 1)))
            if len(edges) == 1:
                edges = np.array([0.0, 1.0])
        bins = np.clip(np.digitize(scores, edges) - 1, 0, len(edges) - 2)
        sums = np.bincount(bins, weights=outcomes, minlength=len(edges) - 1)
        counts = np.bincount(bins, minlength=len(edges) - 1)
        values = np.full(len(edges) - 1, outcomes.mean())
        np.divide(sums, counts, out=values, where=counts > 0)
        return edges, values

    def _apply_binary(self, fitted, scores):
        edges, values = fitted
        return values[np.clip(np.digitize(scores, edges) - 1, 0, len(edges) - 2)]


def centred_isotonic_points(scores, outcomes, keep=(0.0, 1.0)):
    """Oron and Flournoy's CIR knots from the isotonic fit (as cir_model builds them): each
    flat run of the isotonic fit collapses to one point at its scores' mean, except runs at
    a value of ``keep`` (0 and 1) and the ends of the range, which keep their end points."""
    order = np.argsort(scores, kind="stable")
    x = np.asarray(scores, dtype=np.float64)[order]
    fitted = IsotonicRegression(out_of_bounds="clip").fit(x, np.asarray(outcomes)[order])
    level = fitted.predict(x)
    steps = level[np.sort(np.unique(level, return_index=True)[1])]
    points = set()
    for n, value in enumerate(steps):
        run = x[level == value]
        mean = run.mean()
        if value in keep:
            points.update({(run[0], value), (run[-1], value)})
        elif n == 0:
            points.update({(run[0], value), (mean, value)})
        elif n == len(steps) - 1:
            points.update({(mean, value), (run[-1], value)})
        else:
            points.add((mean, value))
    knots = np.array(sorted(points))
    return knots[:, 0], knots[:, 1]


class CenteredIsotonic(_OneVsRestFloor):
    """Centred isotonic regression (Oron and Flournoy 2017) one-vs-rest: the isotonic fit's
    flat runs collapsed to points (`centred_isotonic_points`), then linear interpolation
    between them, as isotonic regression refitted on those points (cir_model) predicts;
    scores outside the calibration range take the end values (CalArena clips them).

    Parameters
    ----------
    two_class_floor : float
        A two-class task's floor (see `_OneVsRestFloor`; 1e-30 before 2026-11-28).
    """

    def __init__(self, two_class_floor=TINY32):
        self.two_class_floor = two_class_floor

    def _fit_binary(self, scores, outcomes):
        x, y = centred_isotonic_points(scores, outcomes)
        # cir_model refits isotonic regression on the points: averaging duplicated scores
        # and pooling any violation the collapse leaves, which np.interp alone would not.
        return IsotonicRegression(out_of_bounds="clip").fit(x, y)

    def _apply_binary(self, fitted, scores):
        return np.clip(fitted.predict(scores), 0.0, 1.0)


class DirichletKernel(Calibrator):
    r"""Kernel calibration as Popordanoska et al.'s estimator (probmetrics' ``KernelCalibrator``,
    CalArena's Kernel): the Nadaraya-Watson mean of the calibration labels under a Dirichlet
    kernel centred on each calibration point,

    .. math:: \hat p_j(p) = \frac{\sum_i K(p; p_i)\,[y_i = j]}{\sum_i K(p; p_i)},\qquad
        K(p; p_i) = \mathrm{Dir}(p;\ p_i / h + 1),

    with every probability clamped into [1e-10, 1 - 1e-10] first. ``bandwidth="auto"``
    takes Scott's rule, ``n^{-2/(d+4)}``, ``d = k - 1``. Valk's ``kernel_dir`` corrects ``p`` by the
    weighted calibration error instead.

    Parameters
    ----------
    bandwidth : float or "auto"
        h; "auto" is Scott's rule above.
    clamp : float
        Probabilities are clamped into [clamp, 1 - clamp] before the log.
    """

    input_kind = "probabilities"
    _parameter_constraints = {"bandwidth": AutoOr(POSITIVE)}
    # A class no nearby calibration point has gets a weight that underflows to 0.
    _certainty = "possible"

    def __init__(self, bandwidth="auto", clamp=1e-10):
        self.bandwidth = bandwidth
        self.clamp = clamp

    def _fit(self, logits, y):
        probs = np.clip(
            calarena_probabilities(logits).astype(np.float64), self.clamp, 1 - self.clamp
        )
        n, k = probs.shape
        self.bandwidth_ = (
            n ** (-2.0 / ((k - 1) + 4.0)) if self.bandwidth == "auto" else float(self.bandwidth)
        )
        alphas = probs / self.bandwidth_ + 1.0
        self.exponents_ = alphas - 1.0
        self.log_beta_ = gammaln(alphas).sum(axis=1) - gammaln(alphas.sum(axis=1))
        self.one_hot_ = np.eye(k)[y]

    def _predict_proba(self, logits):
        log_z = np.log(
            np.clip(calarena_probabilities(logits).astype(np.float64), self.clamp, 1 - self.clamp)
        )
        out = np.empty((len(log_z), self.n_classes_))
        chunk = max(1, 4_000_000 // len(self.log_beta_))
        for start in range(0, len(log_z), chunk):
            log_w = log_z[start : start + chunk] @ self.exponents_.T - self.log_beta_
            log_w -= log_w.max(axis=1, keepdims=True)
            w = np.exp(log_w)
            out[start : start + chunk] = (w @ self.one_hot_) / w.sum(axis=1, keepdims=True)
        return out


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


class LucenaSpline(Calibrator):
    """Lucena's spline calibration (splinecalib's ``SplineCalib`` with its defaults, as
    CalArena's Spline): penalised logistic regression on a natural-spline basis of the
    log-odds, one-vs-rest for several classes, the penalty chosen by 5-fold CV. Gupta et
    al.'s spline (``spline``) recalibrates the top-1 confidence instead.

    Parameters
    ----------
    None
    """

    input_kind = "probabilities"
    _certainty = "possible"

    def _fit(self, logits, y):
        probs = calarena_probabilities(logits)
        if len(np.unique(probs)) < 3:  # splinecalib fails on fewer distinct scores
            self.model_ = None
            return
        self.model_ = optional_module("splinecalib").SplineCalib()
        self.model_.fit(probs, y)

    def _predict_proba(self, logits):
        probs = calarena_probabilities(logits)
        if self.model_ is None:
            return probs.astype(np.float64)
        out = np.asarray(self.model_.calibrate(probs), dtype=np.float64)
        return out / out.sum(axis=1, keepdims=True)


class NetcalENIR(Calibrator):
    """ENIR, the ensemble of near-isotonic regressions (Naeini and Cooper 2016), as netcal's
    ``ENIR`` and as CalArena runs it (probmetrics' ``NetcalENIRCalibrator``): on class 1's
    float32 probability; where netcal's fit fails (it does on separable data, AUC = 1),
    isotonic regression instead, with a warning, and ``fallback_`` says so. With more
    classes one ENIR per class against the rest, rows renormalised, clipped into [0, 1].

    Parameters
    ----------
    None
    """

    input_kind = "probabilities"
    _certainty = "possible"

    def _fit(self, logits, y):
        optional_module("netcal")
        enir = importlib.import_module("netcal.binning.ENIR")
        probs = calarena_probabilities(logits)
        self.models_, self.fallback_ = [], []
        for c in binary_columns(probs.shape[1]):
            scores, hits = probs[:, c], (y == c).astype(np.int64)
            try:
                model, fallback = enir.ENIR().fit(scores, hits), False
            except Exception as exc:  # noqa: BLE001 (CalArena falls back on any failure)
                warnings.warn(
                    f"netcal's ENIR failed on class {c} ({type(exc).__name__}: {exc}); "
                    "isotonic regression instead, as CalArena falls back.",
                    RuntimeWarning,
                    stacklevel=3,
                )
                model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
                model, fallback = model.fit(scores, hits), True
            self.models_.append(model)
            self.fallback_.append(fallback)

    def _predict_proba(self, logits):
        probs = calarena_probabilities(logits)
        k = probs.shape[1]
        mapped = np.column_stack(
            [
                model.predict(probs[:, c]) if fallback else model.transform(probs[:, c])
                for c, model, fallback in zip(
                    binary_columns(k), self.models_, self.fallback_, strict=True
                )
            ]
        ).astype(np.float64)
        return class_probabilities(np.clip(np.nan_to_num(mapped), 0.0, 1.0), k)


class NetcalBBQ(Calibrator):
    """Bayesian binning into quantiles (Naeini et al. 2015) as netcal's ``BBQ``: for several
    classes, one BBQ per class against the rest, rows renormalised, clipped into [0, 1].

    Parameters
    ----------
    None
    """

    input_kind = "probabilities"
    _certainty = "possible"

    def _fit(self, logits, y):
        optional_module("netcal")
        bbq = importlib.import_module("netcal.binning.BBQ")

        with _quiet_tqdm(bbq):
            self.model_ = bbq.BBQ().fit(calarena_probabilities(logits), y)

    def _predict_proba(self, logits):
        out = np.asarray(self.model_.transform(calarena_probabilities(logits)), dtype=np.float64)
        # Two classes: netcal returns the second class's probability alone.
        out = np.nan_to_num(np.column_stack([1 - out, out]) if out.ndim == 1 else out)
        sums = out.sum(axis=1, keepdims=True)
        # netcal divides by the row sum itself: a row of zeros comes back as NaN.
        return np.where(sums > 0, out / np.where(sums > 0, sums, 1.0), 1.0 / out.shape[1])
