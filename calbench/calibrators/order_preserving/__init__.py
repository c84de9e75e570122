"""Intra order-preserving calibration maps (Rahimi et al. 2020)."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.order_preserving.intra import OrderPreservingCalibrator

__all__ = ["OrderPreservingCalibrator"]
