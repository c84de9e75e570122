"""How sure is a stored number: bootstrap distributions of a cell's metrics, from its stored
test predictions (nothing is refitted).

A resample draws each test point with replacement, within its label (``stratify``, the
default: every resample keeps the test set's class counts) or over the whole set (as
`scipy.stats.bootstrap` draws: ``rng.integers(0, n, (B, n))``). The indices of a fold are
seeded by the run's bootstrap seed and the fold's labels, so every method scored on the same
test points gets the same resamples: their differences are paired, and the interval of a
difference is narrower than the two intervals suggest.

For a fold-based protocol, each outer fold is resampled on its own and the statistic of a
resample is the mean over folds of the metric: the distribution is that of the fold mean,
which is what the tables print.

Three ways to a resample's value, each checked on the fold itself before it is used:
metrics that are a mean of per-sample terms (a record's ``terms``: log-loss, Brier, accuracy, the
risks, true confidence CE) are their terms' means (one gather per resample); KS, the binned
ECEs and MCE, the average loss gap and the confidence variance are computed for all
resamples at once (a record's ``resampled``, `calbench.metrics.resampled`); every other
metric is computed afresh on each
resample (`calbench.results.predictions.FoldPredictions.scores`: a prior shift's correction
and weights included). Percentile intervals by default; BCa (Efron and Tibshirani 14.3)
for the per-sample metrics, whose jackknife is closed-form.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtr, ndtri

from calbench.atomic import atomic_save_npz
from calbench.errors import CalbenchError
from calbench.hashing import config_hash
from calbench.metrics import METRICS
from calbench.results.predictions import FoldPredictions

DEFAULT_RESAMPLES = 1000
#: percentile; bca (Efron-Tibshirani); recentred: the percentiles of the replicates shifted
#: by their bias (mean - estimate), i.e. the spread the estimate itself would have over test
#: sets of this size. Binned and KS errors grow under resampling (a sum of absolute gaps),
#: so their percentile interval can lie wholly above the estimate; the recentred one is what
#: a published number from the same estimator is compared with.
INTERVALS = ("percentile", "bca", "recentred")


def resample_indices(
    y: np.ndarray, n_resamples: int, rng: np.random.Generator, stratify: bool = True
) -> np.ndarray:
    """(n_resamples, n) indices into ``y``: with ``stratify``, position i draws among the
    points of label ``y[i]``, so each resample keeps the class counts."""
    n = len(y)
    if not stratify:
        return rng.integers(0, n, (n_resamples, n))
    indices = np.empty((n_resamples, n), dtype=np.intp)
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        indices[:, members] = members[rng.integers(0, len(members), (n_resamples, len(members)))]
    return indices


#: The latest folds' resample indices, by (labels' digest, B, seed, stratify): the methods of
#: one test set share them, and a table asks for each of its cells in turn (a benchmark of
#: many small tasks cycles through all its folds: kept up to a memory budget, not a count).
_DRAWN: OrderedDict = OrderedDict()
_DRAWN_BYTES = 512 * 2**20


def fold_indices(y: np.ndarray, n_resamples: int, seed: int, stratify: bool) -> np.ndarray:
    """`resample_indices` of a fold from `fold_rng`, drawn once for its labels (the latest
    kept, read-only)."""
    key = (_digest(y), n_resamples, seed, stratify)
    if key not in _DRAWN:
        drawn = resample_indices(y, n_resamples, fold_rng(seed, y), stratify)
        drawn.flags.writeable = False
        _DRAWN[key] = drawn
        while len(_DRAWN) > 1 and sum(a.nbytes for a in _DRAWN.values()) > _DRAWN_BYTES:
            _DRAWN.popitem(last=False)
    _DRAWN.move_to_end(key)
    return _DRAWN[key]


def _digest(y: np.ndarray) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(y, dtype=np.int64).tobytes()).digest()


def fold_rng(seed: int, y: np.ndarray) -> np.random.Generator:
    """The generator of a fold's resamples: the bootstrap seed and the fold's labels, so
    that every method scored on these labels is resampled alike."""
    return np.random.default_rng([seed, int.from_bytes(_digest(y)[:8], "little")])


def _terms(fold: FoldPredictions, name: str, options: dict):
    """(per-sample terms, statistic of their mean) of metric ``name`` on ``fold``, where
    they reproduce it and no prior shift reweights it; else None."""
    options = dict(options or {})
    function = options.pop("fn", name)
    spec = METRICS.get(function)
    if spec is None or spec.terms is None or fold.prior_train is not None:
        return None
    statistic = spec.of_mean
    terms = spec.terms(fold, **options)
    if terms is None:
        return None
    statistic = statistic or (lambda mean: mean)
    value = fold.scores({name: {"fn": function, **options}})[name]
    return (terms, statistic) if np.isclose(statistic(terms.mean()), value, 1e-10, 1e-12) else None


def _vectorised(fold: FoldPredictions, name: str, options: dict):
    """A function of the resample indices giving metric ``name`` on each, or None."""
    options = dict(options or {})
    function = options.pop("fn", name)
    resampled = getattr(METRICS.get(function), "resampled", None)
    if resampled is None or fold.prior_train is not None:
        return None
    whole = np.arange(len(fold.y))[None, :]
    value = resampled(fold, whole, **options)
    if value is None:
        return None
    expected = fold.scores({name: {"fn": function, **options}})[name]
    if not np.isclose(value[0], expected, rtol=1e-9, atol=1e-12):
        return None
    return lambda indices: resampled(fold, indices, **options)


def _subset(fold: FoldPredictions, index: np.ndarray) -> FoldPredictions:
    def pick(array):
        return None if array is None else array[index]

    return replace(
        fold,
        y=fold.y[index],
        probs=fold.probs[index],
        uncalibrated=fold.uncalibrated[index],
        true_probs=pick(fold.true_probs),
    )


@dataclass
class Bootstrap:
    """A cell's bootstrap: per metric, the fold-mean statistic on the data (``estimate``),
    on each resample (``replicates``, shape (B,)), and where it is a mean of per-sample
    terms, its leave-one-out values per fold (``jackknife``, for BCa)."""

    estimate: dict[str, float]
    replicates: dict[str, np.ndarray]
    jackknife: dict[str, list[np.ndarray] | None]

    def interval(self, metric: str, alpha: float = 0.05, method: str = "percentile"):
        """(lower, upper) of ``metric`` at level 1 - ``alpha``."""
        return interval(
            self.replicates[metric], self.estimate[metric], alpha, method, self.jackknife[metric]
        )


#: Metrics with no interval (NaN replicates): Kull's consistency-resampling tests, whose
#: value is a decision at their own level, drawn from 1000 resamples of their own.
NOT_RESAMPLED = ("confidence_ece_accepted", "classwise_ece_accepted")


def bootstrap_cell(
    folds: list[FoldPredictions],
    metrics: dict[str, dict],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    stratify: bool = True,
) -> Bootstrap:
    """The bootstrap of ``metrics`` (output name -> options, as a cell's config holds them)
    over the stored ``folds`` of one cell."""
    if n_resamples < 2:
        raise CalbenchError(f"bootstrap resamples must be at least 2; got {n_resamples}.")
    share = 1 / len(folds)  # the statistic is the mean over folds
    estimate = dict.fromkeys(metrics, 0.0)
    replicates = {m: np.zeros(n_resamples) for m in metrics}
    left_out: dict[str, list | None] = {m: [] for m in metrics}
    for fold in folds:
        indices = fold_indices(fold.y, n_resamples, seed, stratify)
        rest = {}
        for name, options in metrics.items():
            if (options or {}).get("fn", name) in NOT_RESAMPLED:
                left_out[name], estimate[name] = None, np.nan
                replicates[name][:] = np.nan
                continue
            found = _terms(fold, name, options)
            if found is None:
                left_out[name] = None
                vectorised = _vectorised(fold, name, options)
                if vectorised is None:
                    rest[name] = options
                    continue
                estimate[name] += share * fold.scores({name: options})[name]
                replicates[name] += share * vectorised(indices)
                continue
            terms, statistic = found
            estimate[name] += share * statistic(terms.mean())
            replicates[name] += share * statistic(terms[indices].mean(axis=1))
            if left_out[name] is not None:  # this fold's statistic without each point
                loo = statistic((terms.sum() - terms) / (len(terms) - 1))
                left_out[name].append(share * (loo - statistic(terms.mean())))
        if rest:
            for name, value in fold.scores(rest).items():
                estimate[name] += share * value
            for b, index in enumerate(indices):
                for name, value in _subset(fold, index).scores(rest).items():
                    replicates[name][b] += share * value
    # A point left out of one fold moves only that fold's share of the mean.
    jackknife = {
        m: None if parts is None else [estimate[m] + part for part in parts]
        for m, parts in left_out.items()
    }
    return Bootstrap(estimate, replicates, jackknife)


def interval(replicates, estimate, alpha=0.05, method="percentile", jackknife=None):
    """The (lower, upper) bootstrap interval at level 1 - ``alpha`` (`INTERVALS`): the
    percentiles of the ``replicates``, those percentiles recentred on the ``estimate``, or
    BCa (``jackknife``: each sample's leave-one-out statistics, as `scipy.stats.bootstrap`
    computes its acceleration; several samples for a fold mean)."""
    if not 0 < alpha < 1:
        raise CalbenchError(f"alpha must lie in (0, 1); got {alpha}.")
    if method not in INTERVALS:
        raise CalbenchError(f"interval method {method!r}: it is one of {', '.join(INTERVALS)}.")
    levels = np.array([alpha / 2, 1 - alpha / 2])
    if method == "bca":
        if jackknife is None:
            raise CalbenchError(
                "BCa needs the jackknife of a mean of per-sample terms (log-loss, Brier, "
                "accuracy, the risks); use the percentile interval for this metric."
            )
        levels = _bca_levels(np.asarray(replicates), estimate, levels, jackknife)
    if method == "recentred":
        replicates = np.asarray(replicates) - (np.mean(replicates) - estimate)
    lower, upper = np.quantile(replicates, levels)
    return float(lower), float(upper)


def _bca_levels(replicates, estimate, levels, jackknife) -> np.ndarray:
    """Efron and Tibshirani's (14.3, 15.4) adjusted levels, as scipy writes them."""
    below = np.count_nonzero(replicates < estimate) + np.count_nonzero(replicates <= estimate)
    z0 = ndtri(below / (2 * len(replicates)))
    u = [(len(j) - 1) * (np.mean(j) - j) for j in jackknife]
    numerator = sum(np.sum(ui**3) / len(ui) ** 3 for ui in u)
    denominator = sum(np.sum(ui**2) / len(ui) ** 2 for ui in u)
    acceleration = numerator / (6 * denominator**1.5) if denominator > 0 else 0.0
    z = ndtri(levels[0]) * np.array([1.0, -1.0])  # scipy's z_alpha and -z_alpha
    return ndtr(z0 + (z0 + z) / (1 - acceleration * (z0 + z)))


@dataclass(frozen=True)
class BootstrapSettings:
    """How intervals are drawn: ``resamples`` (B), the seed of the resamples, stratified by
    label or not, the level 1 - ``alpha`` and the interval ``method``."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    stratify: bool = True
    alpha: float = 0.05
    method: str = "percentile"

    def __post_init__(self):
        if isinstance(self.resamples, bool) or int(self.resamples) < 2:
            raise CalbenchError(f"bootstrap resamples must be at least 2; got {self.resamples}.")
        if not 0 < self.alpha < 1:
            raise CalbenchError(f"alpha must lie in (0, 1); got {self.alpha}.")
        if self.method not in INTERVALS:
            raise CalbenchError(
                f"interval method {self.method!r}: it is one of {', '.join(INTERVALS)}."
            )

    def describe(self) -> str:
        kind = "stratified " if self.stratify else ""
        return (
            f"{100 * (1 - self.alpha):g}% {kind}bootstrap interval of the fold mean "
            f"({self.method}, B = {self.resamples}, seed {self.seed})"
        )


def stored_bootstrap(
    store, cell_hash: str, sha256: str, metrics: list[str], settings: BootstrapSettings
) -> Bootstrap:
    """The bootstrap of a stored cell's ``metrics`` from its stored predictions (their
    checksum ``sha256``, from its rows), kept under ``store/bootstrap/`` by that checksum (a
    recomputed cell gets its own) and the settings: a second ``calbench tables --ci``
    draws nothing."""
    if not sha256:
        raise CalbenchError(
            f"cell {cell_hash} was stored without predictions, so it has no interval; "
            "rerun it with force=true (predictions=auto) to store them."
        )
    config = store.config(cell_hash)
    options = {**(config.get("metrics") or {}), **(config.get("rescored") or {})}
    unknown = [m for m in metrics if m not in options]
    if unknown:
        raise CalbenchError(
            f"cell {cell_hash}: no stored options for metric(s) {unknown}; its config "
            "names the metrics it was scored with."
        )
    # Equal predictions are stored once (uncal is the same in every preset), but a metric's
    # options differ between presets (Kull sums classwise ECE over classes, others average):
    # the cache keys each metric by its options too.
    keys = {m: f"{m}@{config_hash(options[m] or {})[:12]}" for m in metrics}
    strata = "strat" if settings.stratify else "plain"
    name = f"{sha256[:16]}-B{settings.resamples}-s{settings.seed}-{strata}.npz"
    path = store.root / "bootstrap" / name
    cached = _read_cache(path)
    wanted = [m for m in metrics if keys[m] not in cached.estimate]
    if wanted:
        fresh = bootstrap_cell(
            store.predictions(cell_hash, sha256),
            {keys[m]: {"fn": m, **(options[m] or {})} for m in wanted},
            settings.resamples,
            settings.seed,
            settings.stratify,
        )
        cached.estimate.update(fresh.estimate)
        cached.replicates.update(fresh.replicates)
        cached.jackknife.update(fresh.jackknife)
        _write_cache(path, cached)
    parts = (cached.estimate, cached.replicates, cached.jackknife)
    return Bootstrap(*({m: part[keys[m]] for m in metrics} for part in parts))


def _read_cache(path) -> Bootstrap:
    boot = Bootstrap({}, {}, {})
    if not path.is_file():
        return boot
    with np.load(path) as stored:
        for key in stored.files:
            kind, metric, *fold = key.split("/")
            if kind == "estimate":
                boot.estimate[metric] = float(stored[key])
            elif kind == "replicates":
                boot.replicates[metric] = stored[key]
            elif kind == "jackknife":
                boot.jackknife.setdefault(metric, []).append(stored[key])
    for metric in boot.estimate:
        boot.jackknife.setdefault(metric, None)
    return boot


def _write_cache(path, boot: Bootstrap) -> None:
    arrays = {}
    for metric, value in boot.estimate.items():
        arrays[f"estimate/{metric}"] = np.array(value)
        arrays[f"replicates/{metric}"] = boot.replicates[metric]
        for i, part in enumerate(boot.jackknife[metric] or []):
            arrays[f"jackknife/{metric}/{i}"] = part
    atomic_save_npz(path, **arrays)
