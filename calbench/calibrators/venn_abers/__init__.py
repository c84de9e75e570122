"""Venn-Abers predictors, inductive and cross, multiclass."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.venn_abers.predictors import VennAbersCalibrator

__all__ = ["VennAbersCalibrator"]
