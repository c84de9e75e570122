"""Scaling maps: temperature, bias-corrected temperature and vector scaling, ensemble
temperature scaling, beta calibration and the logistic maps of one score (Platt,
quadratic, scaling-binning)."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.scaling.beta import BetaCalibrator
from calbench.calibrators.scaling.ensemble import EnsembleTemperatureScaling
from calbench.calibrators.scaling.logistic import LogitScaling, ScalingBinning
from calbench.calibrators.scaling.temperature import (
    BiasCorrectedTemperatureScaling,
    TemperatureScaling,
    VectorScaling,
)

__all__ = [
    "BetaCalibrator",
    "BiasCorrectedTemperatureScaling",
    "EnsembleTemperatureScaling",
    "LogitScaling",
    "ScalingBinning",
    "TemperatureScaling",
    "VectorScaling",
]
