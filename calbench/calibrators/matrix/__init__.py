"""The full linear maps: matrix scaling, Dirichlet calibration and structured matrix and
vector scaling, fitted by the solvers of `calbench.calibrators.solvers`."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.matrix.dirichlet import DirichletCalibrator
from calbench.calibrators.matrix.matrix_scaling import MatrixScaling
from calbench.calibrators.matrix.structured import StructuredScaling

__all__ = ["DirichletCalibrator", "MatrixScaling", "StructuredScaling"]
