"""Parametric maps fitted by L-BFGS in float64 with analytic gradients.

Temperature, bias-corrected temperature, vector and matrix scaling act on logits; Dirichlet
calibration is the same linear family on log-probabilities ``ln softmax(z)`` (Kull sec. 3).
The criterion (``nll`` by default, see `calbench.criteria`) returns its gradient with
respect to the calibrated logits; each map applies its chain rule (``_backward``) and adds
its regulariser, and scipy's L-BFGS-B minimises the total. Closed-form gradients keep an
iteration at two matrix products, the cost that dominates at CIFAR-100 scale.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import ThreadpoolController

from calbench.calibrators.base import Calibrator
from calbench.calibrators.newton import NEWTON_MAX_CLASSES, newton_multinomial
from calbench.criteria import get_criterion
from calbench.errors import CalbenchError, check_choice
from calbench.simplex import log_softmax, softmax

# Matrix products per iteration (n * k * k) above which BLAS may use every thread.
_MULTITHREAD_FLOPS = 1e9
# Found once: looking the BLAS libraries up costs milliseconds, more than a small fit.
_THREADPOOLS = ThreadpoolController()


def _blas_threads(flops: float):
    """One BLAS thread for small problems (see `ParametricCalibrator._fit`), else all."""
    return _THREADPOOLS.limit(limits=1 if flops < _MULTITHREAD_FLOPS else None, user_api="blas")


class ParametricCalibrator(Calibrator):
    """Fits ``softmax(f(x; theta))`` for a differentiable map ``f`` of the input features.

    Subclasses define ``_initial_params`` (a dict of arrays; the identity map, so fitting
    starts from the uncalibrated predictions), ``_forward``, ``_backward`` (the gradient of
    the parameters given the gradient of the output) and optionally ``_penalty`` (value and
    gradients). Learned arrays are stored as attributes with a trailing ``_``.
    """

    run_inputs = ("criterion", "warm_start")

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return log_softmax(logits) if self.input_kind == "probabilities" else logits

    def _initial_params(self, n_classes: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _forward(self, params: dict, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _backward(self, params: dict, x: np.ndarray, out: np.ndarray, grad_out: np.ndarray):
        raise NotImplementedError

    def _penalty(self, params: dict) -> tuple[float, dict]:
        return 0.0, {}

    def _fit(self, logits, y):
        criterion = get_criterion(self.criterion)
        x = self._features(logits)
        init = self._initial_params(logits.shape[1])
        if self.warm_start and getattr(self, "n_iter_", None) is not None:
            # Start from the previous fit (e.g. the neighbouring point of a grid): the
            # objectives are convex, so only the number of iterations changes.
            previous = {name: np.asarray(getattr(self, name)) for name in init}
            if all(previous[n].shape == a.shape for n, a in init.items()):
                init = previous
        shapes = {name: a.shape for name, a in init.items()}
        splits = np.cumsum([int(np.prod(s)) for s in shapes.values()])[:-1]

        def unpack(theta):
            parts = np.split(theta, splits)
            return {n: p.reshape(s) for (n, s), p in zip(shapes.items(), parts, strict=True)}

        def objective(theta):
            params = unpack(theta)
            out = self._forward(params, x)
            value, grad_out = criterion(out, y)
            grads = self._backward(params, x, out, grad_out)
            penalty, penalty_grads = self._penalty(params)
            for name, g in penalty_grads.items():
                grads[name] = grads[name] + g
            flat = np.concatenate([np.ravel(grads[name]) for name in shapes])
            return value + penalty, flat

        theta0 = np.concatenate([a.ravel() for a in init.values()]).astype(np.float64)
        # Piecewise criteria (Ho's ECE, Direct and Integral Loss) have flat, non-unique
        # minima where L-BFGS creeps on by tiny decreases: stopping at a relative decrease
        # of tol * 1e-2 instead of tol * 1e-4 cut the slowest Direct Loss fits 2-4x and
        # moved at most one test decision in 3000 (20-class BCTS / VS).
        ftol = self.tol * (1e-4 if getattr(criterion, "smooth", True) else 1e-2)
        # One iteration is a few (n x k) by (k x k) products separated by L-BFGS work, so
        # BLAS threads fall asleep between them and waking them costs more than they save:
        # at 5000 x 100 one thread fits dir_odir twice as fast as two. Large problems keep
        # every thread.
        with _blas_threads(x.shape[0] * x.shape[1] ** 2):
            result = minimize(
                objective,
                theta0,
                jac=True,
                method="L-BFGS-B",
                options={
                    "maxiter": self.max_iter,
                    "maxcor": 20,
                    "gtol": self.tol,
                    "ftol": ftol,
                },
            )
        # status 2 ("abnormal termination in line search") means no further decrease was
        # found at float64 precision, i.e. at the optimum; only running out of iterations
        # leaves a map that is not the minimiser.
        if result.status == 1:
            hint = (
                "raise max_iter or check the data"
                if getattr(criterion, "smooth", True)
                else "the criterion is piecewise, so its flat minima may never pass the "
                "convergence test; the map is the best found"
            )
            warnings.warn(
                f"{type(self).__name__}: L-BFGS stopped before converging after "
                f"{result.nit} iterations ({result.message}); {hint}.",
                ConvergenceWarning,
                stacklevel=3,
            )
        for name, value in unpack(result.x).items():
            setattr(self, name, value.copy())
        self.n_iter_ = int(result.nit)
        self.loss_ = float(result.fun)

    def _predict_proba(self, logits):
        params = {
            name: np.asarray(getattr(self, name)) for name in self._initial_params(self.n_classes_)
        }
        return softmax(self._forward(params, self._features(logits)))


class TemperatureScaling(ParametricCalibrator):
    """``softmax(z / t)`` with one temperature ``t > 0`` (Guo et al. 2017; Valk 2.5.2).

    ``t`` is fitted as ``log t`` so it stays positive without bounds. For every parametric
    map, L-BFGS-B stops after ``max_iter`` iterations, or when the largest gradient entry is
    below ``tol``, or when the objective's relative decrease falls below ``tol * 1e-4``
    (``tol * 1e-2`` for the piecewise decision criteria). ``warm_start=True`` starts a
    refit from the previous solution (inner CV walks a grid so).
    """

    def __init__(self, criterion="nll", max_iter=1000, tol=1e-6, warm_start=False):
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(())}

    def _forward(self, params, x):
        return x * np.exp(-params["log_temperature_"])

    def _backward(self, params, x, out, grad_out):
        return {"log_temperature_": -(grad_out * out).sum()}

    @property
    def temperature_(self) -> float:
        return float(np.exp(self.log_temperature_))


class BiasCorrectedTemperatureScaling(TemperatureScaling):
    """``softmax(z / t + b)``: temperature plus one bias per class (Alexandari et al.; Ho 2.6.1)."""

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(()), "intercept_": np.zeros(n_classes)}

    def _forward(self, params, x):
        return x * np.exp(-params["log_temperature_"]) + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        scaled = out - params["intercept_"]
        return {"log_temperature_": -(grad_out * scaled).sum(), "intercept_": grad_out.sum(axis=0)}


class VectorScaling(TemperatureScaling):
    """``softmax(w * z + b)``: one scale and one bias per class (Guo et al.; Valk 2.5.3)."""

    def _initial_params(self, n_classes):
        return {"coef_": np.ones(n_classes), "intercept_": np.zeros(n_classes)}

    def _forward(self, params, x):
        return x * params["coef_"] + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        return {"coef_": (grad_out * x).sum(axis=0), "intercept_": grad_out.sum(axis=0)}


class MatrixScaling(ParametricCalibrator):
    r"""``softmax(W z + b)`` on logits, with optional L2 or ODIR regularisation.

    ODIR (Kull sec. 3) penalises off-diagonal weights and intercepts separately:

    .. math::

        \lambda \frac{1}{k(k-1)} \sum_{i \ne j} w_{ij}^2 + \mu \frac{1}{k} \sum_j b_j^2

    L2 penalises all weights but not the intercept, ``lambda * sum_ij w_ij^2``, which is
    scikit-learn's multinomial ``LogisticRegression`` with ``C = 1 / (2 n lambda)``; with
    ``penalise_intercept=True`` also ``lambda * sum_j b_j^2``, as the Keras Dir-L2 of Kull
    et al.'s deep-net experiments (``l2(lambda)`` on kernel and bias).

    Parameters
    ----------
    regularization : {"none", "l2", "odir"}
    reg_lambda : float
        Weight of the (off-diagonal) weight penalty.
    reg_mu : float
        Weight of the intercept penalty (ODIR only).
    penalise_intercept : bool
        L2 only: penalise the intercept with ``reg_lambda`` too.
    reference_class : bool
        Fix the last class's row of ``[W | b]`` at zero (softmax is unchanged by
        subtracting one row from all), so that the penalty falls on the other rows'
        differences from it, as Kull et al.'s dirichlet_python at the commit of their UCI
        study (``ref_row=True``: ``lambda * sum (w_i - w_k)^2`` over weights and intercepts
        with ``penalise_intercept``). The default (False) penalises ``[W | b]`` itself,
        which treats the classes alike. Newton solver only (up to 36 classes, log-loss).
    criterion : str
        What to minimise, see `calbench.criteria`.
    solver : {"auto", "newton", "lbfgs"}
        "auto": Newton's method (`calbench.calibrators.newton`) for the log-loss with at
        most 36 classes, where the Hessian is small and L-BFGS can stall on badly scaled
        inputs; L-BFGS otherwise.
    """

    def __init__(
        self,
        regularization="odir",
        reg_lambda=0.0,
        reg_mu=0.0,
        criterion="nll",
        max_iter=2000,
        tol=1e-6,
        warm_start=False,
        solver="auto",
        penalise_intercept=False,
        reference_class=False,
    ):
        self.regularization = regularization
        self.reference_class = reference_class
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.penalise_intercept = penalise_intercept
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.solver = solver

    def _initial_params(self, n_classes):
        return {"coef_": np.eye(n_classes), "intercept_": np.zeros(n_classes)}

    def _forward(self, params, x):
        return x @ params["coef_"].T + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        return {"coef_": grad_out.T @ x, "intercept_": grad_out.sum(axis=0)}

    def _penalty_weights(self, k):
        """The penalty as weights of the squared entries of ``[W | b]`` (both are diagonal)."""
        kind = check_choice(
            self.regularization, "regularization", type(self).__name__, ("none", "l2", "odir")
        )
        weights = np.zeros((k, k + 1))
        if kind == "l2":
            weights[:, : k + 1 if self.penalise_intercept else k] = self.reg_lambda
        elif kind == "odir":
            weights[:, :k] = self.reg_lambda / (k * (k - 1))
            weights[np.arange(k), np.arange(k)] = 0.0
            weights[:, k] = self.reg_mu / k
        return weights

    def _fit(self, logits, y):
        solver = check_choice(
            self.solver, "solver", type(self).__name__, ("auto", "newton", "lbfgs")
        )
        k = logits.shape[1]
        newton = solver == "newton" or (
            solver == "auto" and self.criterion == "nll" and k <= NEWTON_MAX_CLASSES
        )
        if self.reference_class and not newton:
            raise CalbenchError(
                f"{type(self).__name__}: reference_class=True needs the Newton solver "
                f"(log-loss, at most {NEWTON_MAX_CLASSES} classes); got solver={solver!r}, "
                f"criterion={self.criterion!r} and {k} classes."
            )
        if not newton:
            return super()._fit(logits, y)
        if self.criterion != "nll":
            raise CalbenchError(
                f"{type(self).__name__}: solver='newton' fits the log-loss only; "
                f"use solver='lbfgs' for criterion={self.criterion!r}."
            )
        init = np.hstack([np.eye(k), np.zeros((k, 1))])
        free = np.ones_like(init, dtype=bool)
        if self.reference_class:
            init -= init[-1]  # the identity map, its last row at zero
            free[-1] = False
        if self.warm_start and getattr(self, "n_iter_", None) is not None:
            init = np.hstack([self.coef_, self.intercept_[:, None]])
        with _blas_threads(logits.shape[0] * (k * (k + 1)) ** 2):
            a, self.n_iter_, self.loss_ = newton_multinomial(
                self._features(logits), y, init, self._penalty_weights(k), free=free
            )
        self.coef_, self.intercept_ = a[:, :k].copy(), a[:, k].copy()

    def _penalty(self, params):
        kind = check_choice(
            self.regularization, "regularization", type(self).__name__, ("none", "l2", "odir")
        )
        w, b = params["coef_"], params["intercept_"]
        if kind == "l2" and self.penalise_intercept:
            value = self.reg_lambda * ((w**2).sum() + (b**2).sum())
            return value, {"coef_": 2 * self.reg_lambda * w, "intercept_": 2 * self.reg_lambda * b}
        if kind == "l2":
            return self.reg_lambda * (w**2).sum(), {"coef_": 2 * self.reg_lambda * w}
        if kind == "odir":
            k = w.shape[0]
            off = w - np.diag(np.diag(w))
            scale = self.reg_lambda / (k * (k - 1))
            value = scale * (off**2).sum() + self.reg_mu * (b**2).sum() / k
            return value, {"coef_": 2 * scale * off, "intercept_": 2 * self.reg_mu * b / k}
        return 0.0, {}


class DirichletCalibrator(MatrixScaling):
    """Dirichlet calibration ``softmax(W ln p + b)`` (Kull sec. 3): matrix scaling on
    log-probabilities. Zero probabilities cannot arise: ``ln p`` is computed as
    ``log_softmax(z)``; data given as probabilities arrive as ``log(clip(p, 2.2e-308))``.
    """

    input_kind = "probabilities"
