"""scipy's L-BFGS-B as every parametric map runs it (`lbfgs`), the BLAS threads a fit's size
deserves, the torch device a map fits on and the warning of a fit that ran out of steps."""

from __future__ import annotations

from scipy.optimize import minimize

from calbench.calibrators.solvers.threads import blas_threads
from calbench.device import resolve_device

# Matrix products per iteration (n * k * k) above which BLAS may use every thread.
_MULTITHREAD_FLOPS = 1e9
# Matrix-scaling fits with n * k * k at least this compute their products in float32.
FLOAT32_PRODUCTS = 5e9


def warn_unconverged(model, fit) -> None:
    """One warning where a preconditioned fit (`calbench.calibrators.solvers.preconditioned`) ran
    out of steps, naming how far from converged it stopped."""
    if not fit.converged:
        model.unconverged(
            f"{type(model).__name__}: L-BFGS stopped before converging after "
            f"{fit.n_iter} iterations (largest gradient entry {fit.gradient_max:.1e}); "
            "raise max_iter or check the data.",
            stacklevel=6,
        )


def accelerator(name):
    """The torch device for ``name`` where it is a GPU, else None (the numpy path)."""
    if name is None or name == "cpu":
        return None
    device = resolve_device(name)
    return None if device.type == "cpu" else device


def threads_for(flops: float):
    """One BLAS thread for small problems (see `ParametricCalibrator._fit`), else all."""
    return blas_threads(1 if flops < _MULTITHREAD_FLOPS else None)


#: The corrections `lbfgs` keeps, and the workspace scipy's L-BFGS-B allocates for them at
#: the start, in copies of the parameters (2 m + 5; at 10,000 classes a full map's 36 GB).
LBFGS_CORRECTIONS = 20
LBFGS_COPIES = 2 * LBFGS_CORRECTIONS + 5


def lbfgs(objective, theta0, *, max_iter, tol, ftol, callback=None):
    """scipy's L-BFGS-B on ``objective(theta) -> (value, gradient)``, as every map here runs
    it: `LBFGS_CORRECTIONS` kept, stopping at gradient ``tol`` or relative decrease ``ftol``
    (or where ``callback``, called with each step's result, raises StopIteration)."""
    options = {"maxiter": max_iter, "maxcor": LBFGS_CORRECTIONS, "gtol": tol, "ftol": ftol}
    return minimize(
        objective, theta0, jac=True, method="L-BFGS-B", options=options, callback=callback
    )
