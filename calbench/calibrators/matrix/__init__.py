"""The full linear maps: matrix scaling, Dirichlet calibration and structured matrix and
vector scaling, fitted by the solvers of `calbench.calibrators.solvers`."""
