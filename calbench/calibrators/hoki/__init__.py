"""Hoki: confidence calibration from random logit transformations (Jang et al.)."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.hoki.transforms import HokiCalibrator

__all__ = ["HokiCalibrator"]
