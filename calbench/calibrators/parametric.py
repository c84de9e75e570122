"""Parametric maps fitted by L-BFGS in float64 with autograd gradients.

Temperature, bias-corrected temperature, vector and matrix scaling act on logits; Dirichlet
calibration is the same linear family on log-probabilities ``ln softmax(z)`` (Kull sec. 3).
Each map is a small torch function of its parameters; the criterion (``nll`` by default,
see `calbench.criteria`) plus the regulariser is minimised by scipy's L-BFGS-B.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from calbench.calibrators.base import Calibrator
from calbench.criteria import get_criterion
from calbench.errors import check_choice
from calbench.simplex import log_softmax, softmax


class ParametricCalibrator(Calibrator):
    """Fits ``softmax(f(x; theta))`` for a differentiable ``f`` on the input features.

    Subclasses define ``_initial_params`` (a dict of arrays; the identity map, so that
    fitting starts from the uncalibrated predictions), ``_transform`` (torch) and,
    optionally, ``_penalty``. Learned arrays are stored as attributes with a trailing ``_``.
    """

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return log_softmax(logits) if self.input_kind == "probabilities" else logits

    def _initial_params(self, n_classes: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _transform(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _penalty(self, params: dict[str, torch.Tensor]) -> torch.Tensor | float:
        return 0.0

    def _fit(self, logits, y):
        criterion = get_criterion(self.criterion)
        x = torch.from_numpy(self._features(logits))
        target = torch.from_numpy(y)
        init = self._initial_params(logits.shape[1])
        shapes = {name: a.shape for name, a in init.items()}
        sizes = [int(np.prod(s)) for s in shapes.values()]

        def unpack(theta):
            parts = torch.split(theta, sizes)
            return {n: p.reshape(s) for (n, s), p in zip(shapes.items(), parts, strict=True)}

        def objective(theta_np):
            theta = torch.from_numpy(theta_np).requires_grad_(True)
            params = unpack(theta)
            loss = criterion(self._transform(params, x), target) + self._penalty(params)
            loss.backward()
            return loss.item(), theta.grad.numpy().copy()

        theta0 = np.concatenate([a.ravel() for a in init.values()]).astype(np.float64)
        result = minimize(
            objective,
            theta0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": self.max_iter, "maxcor": 20, "gtol": self.tol, "ftol": 1e-13},
        )
        # status 2 ("abnormal termination in line search") means no further decrease was
        # found at float64 precision, i.e. at the optimum; only running out of iterations
        # leaves a map that is not the minimiser.
        if result.status == 1:
            warnings.warn(
                f"{type(self).__name__}: L-BFGS stopped before converging after "
                f"{result.nit} iterations ({result.message}); raise max_iter or check the data.",
                ConvergenceWarning,
                stacklevel=3,
            )
        fitted = unpack(torch.from_numpy(result.x))
        for name, value in fitted.items():
            setattr(self, name, value.numpy().copy())
        self.n_iter_ = int(result.nit)
        self.loss_ = float(result.fun)

    def _fitted_params(self) -> dict[str, torch.Tensor]:
        names = self._initial_params(self.n_classes_)
        return {name: torch.from_numpy(np.asarray(getattr(self, name))) for name in names}

    def _predict_proba(self, logits):
        with torch.no_grad():
            out = self._transform(self._fitted_params(), torch.from_numpy(self._features(logits)))
        return softmax(out.numpy())


class TemperatureScaling(ParametricCalibrator):
    """``softmax(z / t)`` with one temperature ``t > 0`` (Guo et al. 2017; Valk 2.5.2).

    ``t`` is fitted as ``log t`` so it stays positive without bounds.
    """

    def __init__(self, criterion="nll", max_iter=1000, tol=1e-8):
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(())}

    def _transform(self, params, x):
        return x * torch.exp(-params["log_temperature_"])

    @property
    def temperature_(self) -> float:
        return float(np.exp(self.log_temperature_))


class BiasCorrectedTemperatureScaling(TemperatureScaling):
    """``softmax(z / t + b)``: temperature plus one bias per class (Alexandari et al.; Ho 2.6.1)."""

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(()), "intercept_": np.zeros(n_classes)}

    def _transform(self, params, x):
        return x * torch.exp(-params["log_temperature_"]) + params["intercept_"]


class VectorScaling(TemperatureScaling):
    """``softmax(w * z + b)``: one scale and one bias per class (Guo et al.; Valk 2.5.3)."""

    def _initial_params(self, n_classes):
        return {"coef_": np.ones(n_classes), "intercept_": np.zeros(n_classes)}

    def _transform(self, params, x):
        return x * params["coef_"] + params["intercept_"]


class MatrixScaling(ParametricCalibrator):
    r"""``softmax(W z + b)`` on logits, with optional L2 or ODIR regularisation.

    ODIR (Kull sec. 3) penalises off-diagonal weights and intercepts separately:

    .. math::

        \lambda \frac{1}{k(k-1)} \sum_{i \ne j} w_{ij}^2 + \mu \frac{1}{k} \sum_j b_j^2

    L2 penalises all weights but not the intercept, ``lambda * sum_ij w_ij^2``, which is
    scikit-learn's multinomial ``LogisticRegression`` with ``C = 1 / (2 n lambda)``.

    Parameters
    ----------
    regularization : {"none", "l2", "odir"}
    reg_lambda : float
        Weight of the (off-diagonal) weight penalty.
    reg_mu : float
        Weight of the intercept penalty (ODIR only).
    criterion : str
        What to minimise, see `calbench.criteria`.
    """

    def __init__(
        self, regularization="odir", reg_lambda=0.0, reg_mu=0.0, criterion="nll",
        max_iter=2000, tol=1e-8,
    ):
        self.regularization = regularization
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol

    def _initial_params(self, n_classes):
        return {"coef_": np.eye(n_classes), "intercept_": np.zeros(n_classes)}

    def _transform(self, params, x):
        return x @ params["coef_"].T + params["intercept_"]

    def _penalty(self, params):
        kind = check_choice(
            self.regularization, "regularization", type(self).__name__, ("none", "l2", "odir")
        )
        w, b = params["coef_"], params["intercept_"]
        if kind == "l2":
            return self.reg_lambda * (w**2).sum()
        if kind == "odir":
            k = w.shape[0]
            off_diagonal = (w**2).sum() - (torch.diagonal(w) ** 2).sum()
            return self.reg_lambda * off_diagonal / (k * (k - 1)) + self.reg_mu * (b**2).sum() / k
        return 0.0


class DirichletCalibrator(MatrixScaling):
    """Dirichlet calibration ``softmax(W ln p + b)`` (Kull sec. 3): matrix scaling on
    log-probabilities. Zero probabilities cannot arise: ``ln p`` is computed as
    ``log_softmax(z)``; data given as probabilities arrive as ``log(clip(p, 2.2e-308))``.
    """

    input_kind = "probabilities"
