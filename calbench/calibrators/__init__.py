"""Calibrators by name: ``make_calibrator("dir_odir", reg_lambda=1e-3)``.

Each config name maps to a class and the parameters the name fixes (``dir_l2`` is
`DirichletCalibrator` with ``regularization="l2"``). A new method is one class, one entry
here, one YAML file under ``conf/method`` and one test.
"""

from __future__ import annotations

import inspect

from calbench.calibrators.base import Calibrator
from calbench.calibrators.parametric import (
    BiasCorrectedTemperatureScaling,
    DirichletCalibrator,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
)
from calbench.calibrators.simple import TrueMapCalibrator, Uncalibrated
from calbench.errors import CalbenchError

CALIBRATORS: dict[str, tuple[type[Calibrator], dict]] = {
    "uncal": (Uncalibrated, {}),
    "ts": (TemperatureScaling, {}),
    "bcts": (BiasCorrectedTemperatureScaling, {}),
    "vs": (VectorScaling, {}),
    "ms_odir": (MatrixScaling, {"regularization": "odir"}),
    "dir": (DirichletCalibrator, {"regularization": "none"}),
    "dir_l2": (DirichletCalibrator, {"regularization": "l2"}),
    "dir_odir": (DirichletCalibrator, {"regularization": "odir"}),
    "true_map": (TrueMapCalibrator, {}),
}


def make_calibrator(name: str, **params) -> Calibrator:
    """A new unfitted calibrator registered as ``name``, with ``params`` set."""
    if name not in CALIBRATORS:
        raise CalbenchError(
            f"Unknown calibrator {name!r}; known: {', '.join(sorted(CALIBRATORS))}."
        )
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


__all__ = ["CALIBRATORS", "Calibrator", "make_calibrator"]
