"""The calibrator classes by registered name, with the parameters each name fixes
(``dir_l2`` is `DirichletCalibrator` with ``regularization="l2"``); compositions
(``compose``) and a user's own class (``module:Class``). Method variants (``conf/method``)
build on these names (`calbench.calibrators.methods`).

`LIBRARY_CALIBRATORS` are calbench's own methods; the papers' procedure twins are registered
by their paper packs (`calbench.packs`: each pack's ``CALIBRATORS``), and `CALIBRATORS` is
the two together, the packs loaded on first use, so a pack is never imported by name."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Mapping

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import (
    BetaCalibrator,
    HistogramBinning,
    IsotonicCalibrator,
    SmoothedBinning,
)
from calbench.calibrators.calarena import (
    BoostedCalibrator,
    CenteredIsotonic,
    DirichletKernel,
    LucenaSpline,
    NetcalBBQ,
    NetcalENIR,
    PriorFallbackBinning,
)
from calbench.calibrators.composition import Composition
from calbench.calibrators.decision_calibration import DecisionCalibrator
from calbench.calibrators.forest import RandomCalibrationForest
from calbench.calibrators.hoki import HokiCalibrator
from calbench.calibrators.logit_scaling import LogitScaling, ScalingBinning
from calbench.calibrators.matrix import DirichletCalibrator, MatrixScaling
from calbench.calibrators.mix_n_match import (
    EnsembleTemperatureScaling,
    MulticlassIsotonicRegression,
)
from calbench.calibrators.neighbourhood import KernelCalibrator, KNNCalibrator
from calbench.calibrators.order_preserving import OrderPreservingCalibrator
from calbench.calibrators.scaling import (
    BiasCorrectedTemperatureScaling,
    TemperatureScaling,
    VectorScaling,
)
from calbench.calibrators.simple import TrueMapCalibrator, Uncalibrated
from calbench.calibrators.spline import CDFSpline, SplineCalibrator
from calbench.calibrators.structured import StructuredScaling
from calbench.calibrators.top_versus_all import TopVersusAll
from calbench.calibrators.venn_abers import VennAbersCalibrator
from calbench.errors import CalbenchError, unknown_name
from calbench.packs import PackRegistry

LIBRARY_CALIBRATORS: dict[str, tuple[type[Calibrator], dict]] = {
    "uncal": (Uncalibrated, {}),
    "ts": (TemperatureScaling, {}),
    "bcts": (BiasCorrectedTemperatureScaling, {}),
    "vs": (VectorScaling, {}),
    "ms_odir": (MatrixScaling, {"regularization": "odir"}),
    "sms": (StructuredScaling, {"structure": "matrix"}),
    "svs": (StructuredScaling, {"structure": "vector"}),
    "dir": (DirichletCalibrator, {"regularization": "none"}),
    "dir_l2": (DirichletCalibrator, {"regularization": "l2"}),
    "dir_odir": (DirichletCalibrator, {"regularization": "odir"}),
    "knn_kl": (KNNCalibrator, {"metric": "kl"}),
    "knn_euc": (KNNCalibrator, {"metric": "euclidean"}),
    "kernel_rbf": (KernelCalibrator, {"kernel": "rbf"}),
    "kernel_dir": (KernelCalibrator, {"kernel": "dirichlet"}),
    "forest": (RandomCalibrationForest, {}),
    "histbin_width": (HistogramBinning, {"binning": "equal_width"}),
    "histbin_freq": (HistogramBinning, {"binning": "equal_size"}),
    "binning_width_smoothed": (SmoothedBinning, {"strategy": "uniform"}),
    "binning_freq_smoothed": (SmoothedBinning, {"strategy": "quantile"}),
    "isotonic": (IsotonicCalibrator, {}),
    "beta": (BetaCalibrator, {}),
    "ets": (EnsembleTemperatureScaling, {}),
    "spline": (SplineCalibrator, {}),
    "hoki": (HokiCalibrator, {}),
    "irm": (MulticlassIsotonicRegression, {}),
    "dec": (DecisionCalibrator, {}),
    "iop_full": (OrderPreservingCalibrator, {"family": "full"}),
    "iop_diag": (OrderPreservingCalibrator, {"family": "diagonal"}),
    "tva": (TopVersusAll, {}),
    "venn_abers": (VennAbersCalibrator, {}),
    "true_map": (TrueMapCalibrator, {}),
    # CalArena's methods (probkit/CalArena, probmetrics 1.3), `calbench.calibrators.calarena`.
    "histbin_prior": (PriorFallbackBinning, {}),
    "cir": (CenteredIsotonic, {}),
    "kernel_nw": (DirichletKernel, {}),
    "xgboost": (BoostedCalibrator, {"library": "xgboost"}),
    "lightgbm": (BoostedCalibrator, {"library": "lightgbm"}),
    "catboost": (BoostedCalibrator, {"library": "catboost"}),
    "spline_lucena": (LucenaSpline, {}),
    "bbq": (NetcalBBQ, {}),
    # CalArena's binary logistic maps (one-vs-rest beyond two classes).
    "platt_logits": (LogitScaling, {"features": "affine"}),
    "platt_probs": (LogitScaling, {"features": "affine_probability"}),
    "quadratic": (LogitScaling, {"features": "quadratic"}),
    "scaling_binning": (ScalingBinning, {}),
    "cdf_spline": (CDFSpline, {}),
    "cdf_spline_calarena": (CDFSpline, {"reference_code": True}),
    "enir": (NetcalENIR, {}),
}


CALIBRATORS: Mapping[str, tuple[type[Calibrator], dict]] = PackRegistry(
    "CALIBRATORS", LIBRARY_CALIBRATORS, "calibrator"
)


def _imported(path: str) -> type[Calibrator]:
    """A user's own calibrator, ``module:Class`` (the module importable from the working
    directory, as ``python -m`` would find it): a `Calibrator` subclass, so it runs under
    every protocol, metric and table like the registered ones."""
    module_name, _, class_name = path.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise CalbenchError(f"cannot import calibrator {path!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)):
        raise CalbenchError(
            f"{path} is not a calbench.calibrators.Calibrator subclass: subclass it and "
            "define _fit(logits, y) and _predict_proba(logits)."
        )
    return cls


def make_composition(first: str, second: str, **params) -> Composition:
    """``first`` then ``second`` (registered names); ``params`` as ``second__n_neighbors``."""
    return Composition(registered_calibrator(first), registered_calibrator(second)).set_params(
        **params
    )


def registered_calibrator(name: str, **params) -> Calibrator:
    """A new unfitted calibrator registered as ``name``, with ``params`` set.

    ``name="compose"`` builds a `Composition`: ``registered_calibrator("compose", first="ts",
    second="knn_kl", second__n_neighbors=256)``.
    """
    if name == "compose":
        try:
            return make_composition(**params)
        except TypeError as exc:
            raise CalbenchError(
                f"compose needs first=NAME and second=NAME (registered calibrators): {exc}"
            ) from None
        except ValueError as exc:
            if isinstance(exc, CalbenchError):
                raise
            raise CalbenchError(f"compose: {exc}") from None
    if ":" in name:
        cls, fixed = _imported(name), {}
    elif name not in CALIBRATORS:
        raise unknown_name("calibrator", name, CALIBRATORS, " Or your own class as module:Class.")
    else:
        cls, fixed = CALIBRATORS[name]
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise CalbenchError(
            f"Calibrator {name!r} has no parameter(s) {unknown}; its parameters are "
            f"{sorted(accepted - set(fixed))}."
        )
    clash = sorted(set(params) & set(fixed))
    if clash:
        raise CalbenchError(
            f"Parameter(s) {clash} are fixed by the name {name!r}; choose another method name."
        )
    return cls(**fixed, **params)
