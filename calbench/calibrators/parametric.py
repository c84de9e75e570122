"""Parametric maps fitted by L-BFGS in float64 with analytic gradients: their common base.

Temperature, bias-corrected temperature and vector scaling (`calbench.calibrators.scaling`)
and matrix scaling (`calbench.calibrators.matrix`) act on logits; Dirichlet calibration is
the same linear family on log-probabilities ``ln softmax(z)`` (Kull sec. 3).
The criterion (``nll`` by default, see `calbench.criteria`) returns its gradient with
respect to the calibrated logits; each map applies its chain rule (``_backward``) and adds
its regulariser, and scipy's L-BFGS-B minimises the total. Closed-form gradients keep an
iteration at two matrix products, the cost that dominates at CIFAR-100 scale.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from calbench.calibrators.base import Calibrator
from calbench.calibrators.solvers.lbfgs import accelerator, lbfgs, threads_for
from calbench.criteria import get_criterion
from calbench.device import to_device
from calbench.lazy import LazyModule
from calbench.simplex import log_softmax, softmax

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")


#: The Parameters section of the one-temperature and per-class scaling maps.
SCALING_PARAMETERS = """
    Parameters
    ----------
    criterion : str or dict
        What the map minimises on the calibration data (`calbench.criteria`): ``nll`` (the
        log-loss, default), ``mse``, or a decision criterion's spec.
    max_iter : int
        The most L-BFGS iterations.
    tol : float
        L-BFGS stops when the largest gradient entry falls below ``tol`` or the relative
        decrease of the objective below ``tol * 1e-4`` (``tol * 1e-2`` for piecewise
        criteria).
    warm_start : bool
        Start a refit from the previous solution (inner CV walks a grid so).
    device : str
        ``cpu`` (numpy), or a GPU (``cuda``, ``cuda:N``, ``auto``) where torch computes the
        log-loss and its gradient; results come back float64 and equal the CPU fit's to the
        optimiser's tolerance. Without a GPU: the CPU, with one warning.
"""


def warn_if_no_minimum(model, y, n_classes, unpenalised=True):
    """Warn, before fitting, where the log-loss of a map with a free intercept per class has
    no minimum: a class with no fitting label whose intercept is not penalised
    (``unpenalised``: a bool, or one per class). Its intercept's gradient is the mean of its
    probabilities, positive at every point, so the intercept falls without bound and the
    optimiser runs to ``max_iter`` on an over-fitting map (2,500 rows, 1,000 classes, 82
    of them without a label: vector scaling's test log-loss 4.15 after 50 L-BFGS steps,
    11.98 after 1,000; Newton's method, at -3,010 for an intercept, 18.8)."""
    if model.criterion != "nll":
        return
    absent = np.bincount(y, minlength=n_classes) == 0
    missing = int(np.count_nonzero(absent & unpenalised))
    if missing:
        warnings.warn(
            f"{type(model).__name__}: {missing} of {n_classes} classes have no label among "
            f"the {len(y)} fitting rows, so the log-loss has no minimum: their intercepts "
            "fall without bound and the fit runs to max_iter on a map that over-fits. Fit "
            "a map whose intercepts are penalised (svs; ms_odir up to 2,000 classes) or "
            "temperature scaling (ts), or give every class fitting rows.",
            ConvergenceWarning,
            stacklevel=4,
        )


def exp_any(a):
    """exp of a numpy array or a torch tensor (the maps' forward passes serve both)."""
    return np.exp(a) if isinstance(a, np.ndarray | float) else a.exp()


class ParametricCalibrator(Calibrator):
    """Fits ``softmax(f(x; theta))`` for a differentiable map ``f`` of the input features.

    Subclasses define ``_initial_params`` (a dict of arrays; the identity map, so fitting
    starts from the uncalibrated predictions), ``_forward``, ``_backward`` (the gradient of
    the parameters given the gradient of the output) and optionally ``_penalty`` (value and
    gradients). Learned arrays are stored as attributes with a trailing ``_``.
    """

    run_inputs = ("criterion", "warm_start", "device")

    def _accelerator(self):
        """The torch device this map fits on where ``device`` names a GPU, else None (the
        numpy path): one place to ask, so every family takes the same path."""
        return accelerator(getattr(self, "device", None))

    def _cpu_log_loss(self) -> bool:
        """Whether this fit minimises the log-loss in numpy (the families' closed-form
        solvers and fused evaluations serve that case only)."""
        return self.criterion == "nll" and self._accelerator() is None

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return log_softmax(logits) if self.input_kind == "probabilities" else logits

    def _fitting_features(self, logits: np.ndarray) -> np.ndarray:
        """The features the fit's products use (a map may lower their precision)."""
        return self._features(logits)

    def _initial_params(self, n_classes: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _starting_params(self, logits: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        """Where L-BFGS starts a fit that has no previous solution to start from."""
        return self._initial_params(logits.shape[1])

    def _forward(self, params: dict, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _backward(self, params: dict, x: np.ndarray, out: np.ndarray, grad_out: np.ndarray):
        raise NotImplementedError

    def _penalty(self, params: dict) -> tuple[float, dict]:
        return 0.0, {}

    def _start(self, logits, y) -> dict:
        """Where a fit begins: with ``warm_start``, the previous fit's parameters (e.g. the
        neighbouring point of a grid: the objectives are convex, so only the number of
        iterations changes) where their shapes still fit the data, else `_starting_params`."""
        init = self._initial_params(logits.shape[1])
        if self.warm_start and getattr(self, "n_iter_", None) is not None:
            previous = {name: np.asarray(getattr(self, name)) for name in init}
            if all(previous[n].shape == a.shape for n, a in init.items()):
                return previous
        return self._starting_params(logits, y)

    def _fit(self, logits, y):
        criterion = get_criterion(self.criterion)
        x = self._fitting_features(logits)
        init = self._start(logits, y)
        shapes = {name: a.shape for name, a in init.items()}
        splits = np.cumsum([int(np.prod(s)) for s in shapes.values()])[:-1]

        def unpack(theta):
            parts = np.split(theta, splits)
            return {n: p.reshape(s) for (n, s), p in zip(shapes.items(), parts, strict=True)}

        data_term = self._data_term(criterion, x, y)

        def objective(theta):
            params = unpack(theta)
            value, grads = data_term(params)
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
        with threads_for(x.shape[0] * x.shape[1] ** 2):
            result = lbfgs(objective, theta0, max_iter=self.max_iter, tol=self.tol, ftol=ftol)
        # status 2 ("abnormal termination in line search") means no further decrease was
        # found at float64 precision, i.e. at the optimum; only running out of iterations
        # leaves a map that is not the minimiser.
        if result.status == 1:
            message = (
                f"{type(self).__name__}: L-BFGS stopped before converging after "
                f"{result.nit} iterations ({result.message}); "
            )
            if getattr(criterion, "smooth", True):
                self.unconverged(message + "raise max_iter or check the data.", stacklevel=4)
            else:  # the best point of flat minima: not a failure, so not marked
                warnings.warn(
                    message + "the criterion is piecewise, so its flat minima may never "
                    "pass the convergence test; the map is the best found.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        for name, value in unpack(result.x).items():
            setattr(self, name, value.copy())
        self.n_iter_ = int(result.nit)
        self.loss_ = float(result.fun)

    def _data_term(self, criterion, x, y):
        """``params -> (criterion value, its gradient per parameter)`` on the fitting data:
        numpy with the closed-form chain rule, or, for the log-loss with ``device`` a GPU,
        torch there (the products and the softmax on the GPU; L-BFGS, the penalty and the
        returned numbers float64 on the CPU)."""
        device = self._accelerator()
        if device is not None and self.criterion == "nll":
            features = to_device(x, device)
            labels = to_device(np.asarray(y, dtype=np.int64), device)

            def on_device(params):
                tensors = {
                    name: torch.from_numpy(np.asarray(value, dtype=np.float64))
                    .to(device, features.dtype)
                    .requires_grad_(True)
                    for name, value in params.items()
                }
                out = self._forward(tensors, features).double()
                loss = F.cross_entropy(out, labels)
                loss.backward()
                grads = {n: t.grad.double().cpu().numpy() for n, t in tensors.items()}
                return float(loss.detach()), grads

            return on_device

        def on_cpu(params):
            out = self._forward(params, x)
            value, grad_out = criterion(out, y)
            return value, self._backward(params, x, out, grad_out)

        return on_cpu

    def _predict_proba(self, logits):
        params = {
            name: np.asarray(getattr(self, name)) for name in self._initial_params(self.n_classes_)
        }
        device = self._accelerator()
        if device is None:
            return softmax(self._forward(params, self._features(logits)))
        # On the fit's GPU: inner CV scores every grid point's held-out fold (at ImageNet
        # shape a 5000 x 1000 x 1000 product and 5M exponentials, 40 ms on 16 cores).
        features = to_device(self._features(logits), device, np.float64)
        tensors = {
            n: torch.as_tensor(v, dtype=torch.float64, device=device) for n, v in params.items()
        }
        return torch.softmax(self._forward(tensors, features), dim=1).cpu().numpy()
