"""Non-parametric maps that average calibration errors or labels over a neighbourhood: KNN,
kernels (Valk's and the Dirichlet kernel) and the random calibration forest."""

# The family's classes, importable from the family as from the module that held them
# before the family split (``from calbench.calibrators.scaling import TemperatureScaling``).
from calbench.calibrators.neighbourhood.dirichlet_kernel import DirichletKernel
from calbench.calibrators.neighbourhood.forest import RandomCalibrationForest
from calbench.calibrators.neighbourhood.kernel import KernelCalibrator, KNNCalibrator

__all__ = ["DirichletKernel", "KNNCalibrator", "KernelCalibrator", "RandomCalibrationForest"]
