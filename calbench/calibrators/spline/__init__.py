"""Spline recalibration: Gupta et al.'s gap spline (ranked scores, and CalArena's CDF-Spline)
and Lucena's spline."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.spline.cdf import CDFSpline
from calbench.calibrators.spline.gupta import SplineCalibrator
from calbench.calibrators.spline.lucena import LucenaSpline

__all__ = ["CDFSpline", "LucenaSpline", "SplineCalibrator"]
