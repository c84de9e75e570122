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

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import NON_NEGATIVE, AutoOr, Choice
from calbench.calibrators.newton import (
    NEWTON_MAX_CLASSES,
    NEWTON_VECTOR_MAX_CLASSES,
    newton_multinomial,
    newton_vector,
    row_pull_terms,
)
from calbench.calibrators.threads import blas_threads
from calbench.criteria import EXP_FLOOR, get_criterion
from calbench.device import resolve_device
from calbench.errors import CalbenchError
from calbench.lazy import LazyModule
from calbench.simplex import TORCH_MIN_ENTRIES, log_softmax, softmax

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")

# Matrix products per iteration (n * k * k) above which BLAS may use every thread.
_MULTITHREAD_FLOPS = 1e9
# Matrix-scaling fits with n * k * k at least this compute their products in float32.
_FLOAT32_PRODUCTS = 5e9


#: The Parameters section of the one-temperature and per-class scaling maps.
_SCALING_PARAMETERS = """
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


def _exp(a):
    """exp of a numpy array or a torch tensor (the maps' forward passes serve both)."""
    return np.exp(a) if isinstance(a, np.ndarray | float) else a.exp()


def _accelerator(name):
    """The torch device for ``name`` where it is a GPU, else None (the numpy path)."""
    if name is None or name == "cpu":
        return None
    device = resolve_device(name)
    return None if device.type == "cpu" else device


def _blas_threads(flops: float):
    """One BLAS thread for small problems (see `ParametricCalibrator._fit`), else all."""
    return blas_threads(1 if flops < _MULTITHREAD_FLOPS else None)


def _lbfgs(objective, theta0, *, max_iter, tol, ftol):
    """scipy's L-BFGS-B on ``objective(theta) -> (value, gradient)``, as every map here runs
    it: 20 corrections kept, stopping at gradient ``tol`` or relative decrease ``ftol``."""
    options = {"maxiter": max_iter, "maxcor": 20, "gtol": tol, "ftol": ftol}
    return minimize(objective, theta0, jac=True, method="L-BFGS-B", options=options)


class ParametricCalibrator(Calibrator):
    """Fits ``softmax(f(x; theta))`` for a differentiable map ``f`` of the input features.

    Subclasses define ``_initial_params`` (a dict of arrays; the identity map, so fitting
    starts from the uncalibrated predictions), ``_forward``, ``_backward`` (the gradient of
    the parameters given the gradient of the output) and optionally ``_penalty`` (value and
    gradients). Learned arrays are stored as attributes with a trailing ``_``.
    """

    run_inputs = ("criterion", "warm_start", "device")

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

    def _fit(self, logits, y):
        criterion = get_criterion(self.criterion)
        x = self._fitting_features(logits)
        init = self._initial_params(logits.shape[1])
        previous = None
        if self.warm_start and getattr(self, "n_iter_", None) is not None:
            # Start from the previous fit (e.g. the neighbouring point of a grid): the
            # objectives are convex, so only the number of iterations changes.
            previous = {name: np.asarray(getattr(self, name)) for name in init}
        if previous and all(previous[n].shape == a.shape for n, a in init.items()):
            init = previous
        else:
            init = self._starting_params(logits, y)
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
        with _blas_threads(x.shape[0] * x.shape[1] ** 2):
            result = _lbfgs(objective, theta0, max_iter=self.max_iter, tol=self.tol, ftol=ftol)
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

    def _data_term(self, criterion, x, y):
        """``params -> (criterion value, its gradient per parameter)`` on the fitting data:
        numpy with the closed-form chain rule, or, for the log-loss with ``device`` a GPU,
        torch there (the products and the softmax on the GPU; L-BFGS, the penalty and the
        returned numbers float64 on the CPU)."""
        device = _accelerator(getattr(self, "device", None))
        if device is not None and self.criterion == "nll":
            features = torch.from_numpy(np.ascontiguousarray(x)).to(device)
            labels = torch.from_numpy(np.asarray(y, dtype=np.int64)).to(device)

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
        return softmax(self._forward(params, self._features(logits)))


class TemperatureScaling(ParametricCalibrator):
    __doc__ = (
        """``softmax(z / t)`` with one temperature ``t > 0`` (Guo et al. 2017; Valk 2.5.2).

    ``t`` is fitted as ``log t`` so it stays positive without bounds; ``temperature_`` is
    the fitted ``t``. Matches netcal's ``TemperatureScaling`` (tests/test_calibrators.py).
    """
        + _SCALING_PARAMETERS
    )

    def __init__(self, criterion="nll", max_iter=1000, tol=1e-6, warm_start=False, device="cpu"):
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.device = device

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(())}

    def _forward(self, params, x):
        return x * _exp(-params["log_temperature_"])

    def _backward(self, params, x, out, grad_out):
        return {"log_temperature_": -(grad_out * out).sum()}

    def _data_term(self, criterion, x, y):
        """The log-loss and its derivative in the one parameter, without the (n, k)
        gradient the generic chain rule builds: one exponential pass in torch (5000 x 100:
        2.4 ms an evaluation against 6.6 ms). Small data (under `TORCH_MIN_ENTRIES`
        entries, every UCI set and 10-class network) keep the generic path, bit for bit."""
        fast = self.criterion == "nll" and x.size >= TORCH_MIN_ENTRIES and x.dtype == np.float64
        if not fast or _accelerator(getattr(self, "device", None)) is not None:
            return super()._data_term(criterion, x, y)
        features = torch.from_numpy(np.ascontiguousarray(x))
        label_mean = float(x[np.arange(len(y)), y].mean())

        def one_parameter(params):
            beta = float(_exp(-params["log_temperature_"]))
            scaled = features * beta
            top = scaled.amax(dim=1, keepdim=True)
            # The floor keeps exp() out of subnormals (`calbench.criteria.nll`).
            weights = (scaled - top).clamp_(min=EXP_FLOOR).exp_()
            norm = weights.sum(dim=1)
            value = float((norm.log() + top[:, 0]).mean()) - beta * label_mean
            slope = float(((weights * features).sum(dim=1) / norm).mean()) - label_mean
            return value, {"log_temperature_": np.asarray(-beta * slope)}

        return one_parameter

    @property
    def temperature_(self) -> float:
        return float(np.exp(self.log_temperature_))


class BiasCorrectedTemperatureScaling(TemperatureScaling):
    __doc__ = (
        """``softmax(z / t + b)``: a temperature plus one bias per class (Alexandari et al.
    2020; Ho 2.6.1); ``log_temperature_`` and ``intercept_`` are fitted.
    """
        + _SCALING_PARAMETERS
    )

    _data_term = ParametricCalibrator._data_term

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(()), "intercept_": np.zeros(n_classes)}

    def _forward(self, params, x):
        return x * _exp(-params["log_temperature_"]) + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        scaled = out - params["intercept_"]
        return {"log_temperature_": -(grad_out * scaled).sum(), "intercept_": grad_out.sum(axis=0)}


class VectorScaling(TemperatureScaling):
    __doc__ = (
        """``softmax(w * z + b)``: one scale and one bias per class (Guo et al. 2017; Valk
    2.5.3); ``coef_`` (k,) and ``intercept_`` (k,) are fitted.
    """
        + _SCALING_PARAMETERS
    )

    # The generic chain rule: temperature scaling's one-parameter fast path is not ours.
    _data_term = ParametricCalibrator._data_term

    def _initial_params(self, n_classes):
        return {"coef_": np.ones(n_classes), "intercept_": np.zeros(n_classes)}

    def _fit(self, logits, y):
        if not self._fits_by_newton(logits.shape[1]):
            return super()._fit(logits, y)
        self._fit_vector_by_newton(self._fitting_features(logits), y)

    def _fits_by_newton(self, n_classes: int) -> bool:
        """The log-loss on the CPU up to `NEWTON_VECTOR_MAX_CLASSES` classes: Newton's
        method on the 2k parameters (`newton_vector`), the same minimum as L-BFGS in a
        handful of steps; other criteria, accelerators and more classes take L-BFGS."""
        return (
            self.criterion == "nll"
            and _accelerator(getattr(self, "device", None)) is None
            and n_classes <= NEWTON_VECTOR_MAX_CLASSES
        )

    def _fit_vector_by_newton(self, x, y, pen_w=0.0, pen_b=0.0):
        k = x.shape[1]
        w, b = np.ones(k), np.zeros(k)
        if self.warm_start and getattr(self, "n_iter_", None) is not None:
            if np.shape(self.coef_) == (k,):
                w, b = np.asarray(self.coef_), np.asarray(self.intercept_)
        self.coef_, self.intercept_, self.n_iter_, self.loss_ = newton_vector(
            x, y, w, b, pen_w=pen_w, center_w=1.0, pen_b=pen_b
        )

    def _forward(self, params, x):
        return x * params["coef_"] + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        return {"coef_": (grad_out * x).sum(axis=0), "intercept_": grad_out.sum(axis=0)}


#: ``start="auto"`` begins at the diagonal minimum where an off-diagonal weight's penalty is
#: at least this many times the log-loss's curvature in it (see `MatrixScaling`).
DIAGONAL_START_RATIO = 10.0


def _diagonal_dominates(x, scaled_logits, weights) -> bool:
    """Whether the penalty pins the off-diagonal weights: its mean weight on them against
    the log-loss's mean second derivative in one weight ``w_ij`` at the temperature, about
    ``mean over samples of p_i (1 - p_i) x_j^2`` averaged over i and j."""
    k = x.shape[1]
    off = ~np.eye(k, dtype=bool)
    penalty = weights[:, :k][off].mean() if k > 1 else 0.0
    p = softmax(scaled_logits)
    curvature = np.mean((p * (1 - p)).sum(axis=1) * (x**2).sum(axis=1)) / k**2
    return bool(penalty >= DIAGONAL_START_RATIO * curvature)


def _diagonal_minimum(x, y, temperature, terms, *, tol, max_iter):
    """``(d, b)`` minimising the log-loss of ``softmax(x * d + b)`` plus the matrix map's
    penalty on its diagonal, intercepts and row sums (``terms``:
    `MatrixScaling._penalty_terms`), from ``d = 1 / temperature``, ``b = 0``: the matrix
    map's objective with ``W = diag(d)``."""
    weights, center, (row_weight, row_center) = terms
    k = x.shape[1]
    on_diagonal, to = np.diag(weights[:, :k]), np.diag(center[:, :k])
    # Two pulls on d_i (its own and its row's sum, which is d_i here) make one.
    total = on_diagonal + row_weight
    to = np.where(
        total > 0, (on_diagonal * to + row_weight * row_center) / np.where(total > 0, total, 1), 0.0
    )
    return _diagonal_fit(
        x,
        y,
        np.full(k, 1.0 / temperature),
        np.zeros(k),
        total,
        to,
        weights[:, k].copy(),
        tol=tol,
        max_iter=max_iter,
    )


def _diagonal_fit(x, y, d, b, on_diagonal, center, on_intercept, *, tol, max_iter):
    """``(d, b)`` minimising ``log-loss(softmax(x * d + b)) + on_diagonal @ (d - center)^2
    + on_intercept @ b^2`` from the given ``(d, b)``: Newton's method up to
    `NEWTON_MAX_CLASSES` classes (log-probabilities of exact zeros stall L-BFGS), L-BFGS at
    O(n k) a step above, where Newton's 2k x 2k Hessian costs O(n k^2)."""
    k = x.shape[1]
    if k <= NEWTON_MAX_CLASSES:
        d, b, _, _ = newton_vector(
            x, y, d, b, pen_w=on_diagonal, center_w=center, pen_b=on_intercept, tol=tol * 1e-4
        )
        return d, b
    nll = get_criterion("nll")

    def objective(theta):
        scale, shift = theta[:k], theta[k:]
        value, grad = nll(x * scale + shift, y)
        value += on_diagonal @ (scale - center) ** 2 + on_intercept @ shift**2
        scale_grad = (grad * x).sum(axis=0) + 2 * on_diagonal * (scale - center)
        return value, np.concatenate([scale_grad, grad.sum(axis=0) + 2 * on_intercept * shift])

    result = _lbfgs(objective, np.concatenate([d, b]), max_iter=max_iter, tol=tol, ftol=tol * 1e-4)
    return result.x[:k], result.x[k:]


#: ``reg_diagonal="auto"``: the multiples of ``k^2 / (2n)`` it chooses among, strongest
#: first (100: the diagonal held at the temperature; 0: Kull's ODIR, the diagonal free).
DIAGONAL_STRENGTHS = (100.0, 10.0, 1.0, 0.1, 0.0)
#: The share of the calibration rows ``reg_diagonal="auto"`` holds out to choose.
DIAGONAL_HOLDOUT = 0.2


#: Classes up to which a full k x k map is fitted. At 1,000 (ImageNet) a default fit takes
#: 35 to 40 s on 16 cores; at 2,000 one copy of the parameters is 32 MB and a step costs
#: n k^2 = 1e11 multiplications on 25,000 rows; at 5,000, 200 MB a copy (L-BFGS keeps about
#: 20) and 6e11 a step: hours, so refused before any work.
MATRIX_MAX_CLASSES = 2000


def _check_matrix_size(owner: str, n: int, k: int) -> None:
    if k > MATRIX_MAX_CLASSES:
        raise CalbenchError(
            f"{owner}: a full {k} x {k} map has {k * (k + 1):,} parameters "
            f"({k * (k + 1) * 8 / 1e9:.1f} GB a copy, about 20 copies in L-BFGS) and a step "
            f"costs n k^2 = {n * k * k:.1e} multiplications; it is fitted up to "
            f"{MATRIX_MAX_CLASSES} classes. At {k} classes use a structured map (sms, svs), "
            "vs or ts."
        )


class MatrixScaling(ParametricCalibrator):
    r"""``softmax(W z + b)`` on logits, with optional L2 or ODIR regularisation.

    ODIR (Kull sec. 3) penalises off-diagonal weights and intercepts separately:

    .. math::

        \lambda \frac{1}{k(k-1)} \sum_{i \ne j} w_{ij}^2 + \mu \frac{1}{k} \sum_j b_j^2

    L2 penalises all weights but not the intercept, ``lambda * sum_ij w_ij^2``, which is
    scikit-learn's multinomial ``LogisticRegression`` with ``C = 1 / (2 n lambda)``; with
    ``penalise_intercept=True`` also ``lambda * sum_j b_j^2``, as the Keras Dir-L2 of Kull
    et al.'s deep-net experiments (``l2(lambda)`` on kernel and bias).

    The default strengths (``"auto"``) scale with the number of classes ``k`` and of
    samples ``n``, so that a map made with no arguments is sensible at any ``k`` (with no
    penalty, 25000 x 1000 ImageNet-shaped logits give a million free weights and a test
    log-loss far above the uncalibrated one). Each is a Gaussian prior on the summed
    log-likelihood, divided by ``n`` for the mean log-loss minimised here, whose variance
    is shared out over the weights it covers:

    - ODIR: the k(k-1) off-diagonal weights have prior variance 1 in total, as have the k
      intercepts: ``reg_lambda = k^2 (k-1)^2 / (2n)``, ``reg_mu = k^2 / (2n)``. The
      penalty per weight grows with the weights per sample, as it must where they
      outnumber the samples. (k = 10, n = 5000: 81 and 0.01, the best of a 10x-spaced
      scan on c10_densenet40 for ms_odir, 0.2217 against 0.2264 unpenalised; k = 100,
      n = 5000: 9.8e3 and 1; k = 1000, n = 25000: 2e7 and 20.)
    - L2: Kull's L2 pulls every weight towards 0, so at many classes it shrinks the
      diagonal, which carries the prediction, for want of a strength that fits both the
      diagonal and the k(k-1) others. No strength of it did no harm everywhere: on
      netcal's Wide-ResNet-16-4 CIFAR-100 (uncalibrated 0.955) the best of 10, 1, 0.1,
      0.01 and 0.001 times ``k / (2n)`` gave 0.979, and 1 gave 6.33 against 3.42 at
      ImageNet shape. With the default strength, ``shrink_to="auto"`` therefore pulls
      ``W`` towards temperature scaling's map ``I / T`` instead, at ``reg_lambda = 5 k /
      n`` (each row of ``W - I / T`` with prior variance 0.1). With the row-sum pull
      below: 0.917 on that network, below uncalibrated on every real network here
      (tests/test_defaults.py), and 3.416 against 3.418 uncalibrated at ImageNet shape.
    - ODIR's diagonal: Kull's ODIR leaves it free, k per-class scales. Where the classes
      have a few rows each they fit noise: on 25000 x 1000 ImageNet-shaped logits
      (benchmarks/bench_defaults.py) the free diagonal took held-out log-loss from 3.418
      uncalibrated to 3.439, whatever the other strengths. With the default strengths,
      ``reg_diagonal="auto"`` pulls the diagonal towards the temperature ``1 / T`` of
      temperature scaling on the same data, ``reg_diagonal / k * sum_j (w_jj - 1/T)^2``,
      at the multiple of ``k^2 / (2n)`` in `DIAGONAL_STRENGTHS` whose diagonal map (W held
      diagonal, the other penalties as set) has the lowest log-loss on a seeded
      `DIAGONAL_HOLDOUT` share of the calibration rows, fitted on the rest. No fixed
      multiple served every shape: 1 still harmed at ImageNet shape (3.4183), 10 held the
      diagonal where real networks gain from it. The choice costs a few fits of the
      O(n k) diagonal problem; its held-out log-loss per multiple is kept as
      ``diagonal_scores_``. At ImageNet shape ms_odir then gives 3.415, temperature
      scaling's number.
    - Row sums: on log-probabilities the penalised off-diagonal weights, summed over a
      row and times ``ln p``'s large shared offset (``-logsumexp(z)``), act as per-class
      terms that neither penalty sees. At ImageNet shape, with the diagonal pulled,
      dir_odir still gave 3.4225 (uncalibrated 3.4182): ``W_off @ mean(ln p)`` spread
      0.14 over the classes, the intercepts 0.0015, the diagonal 0.0002. The defaults
      therefore pull each row's sum of weights towards ``1 / T`` (``reg_row_sum``), as
      the intercepts are pulled, at the intercept's weight (ODIR ``reg_mu / k``, L2
      ``reg_lambda``) times the mean square of a row's mean feature: dir_odir 3.4153,
      dir_l2 3.4163. On logits that offset is small and the pull weak. It costs the
      ODIR maps on two of netcal's CIFAR-100 networks, whose per-class terms are real
      (LeNet-5 3.733 against 3.709 without it, Wide-ResNet 0.928 against 0.924), both
      still far below uncalibrated and temperature scaling.

    The values used are kept as ``reg_lambda_``, ``reg_mu_``, ``reg_diagonal_`` and
    ``row_pull_``.
    ``calbench run`` searches the papers' grids by inner CV instead
    (``conf/method/*.yaml``), with the diagonal free as the papers have it.

    Parameters
    ----------
    regularization : {"none", "l2", "odir"}
    reg_lambda : float or "auto"
        Weight of the (off-diagonal) weight penalty.
    reg_mu : float or "auto"
        Weight of the intercept penalty (ODIR only).
    reg_row_sum : float or "auto"
        Weight of the pull of each row's sum of weights towards ``1 / T``:
        ``reg_row_sum * sum_i (sum_j w_ij - 1/T)^2``. "auto": with the default strengths,
        the intercept's weight times the mean square of a row's shared feature offset
        (above); else 0, as Kull's objectives.
    shrink_to : {"auto", "zero", "temperature"}
        L2 only: where the penalty pulls ``W``: 0 (Kull's L2) or ``I / T``, ``T`` the
        temperature scaling fit of the same data. "auto": ``I / T`` with the default
        strength, 0 where ``reg_lambda`` is given.
    reg_diagonal : float or "auto"
        ODIR only: weight of the penalty pulling the diagonal towards ``1 / T``. "auto":
        chosen as above where ``reg_lambda`` and ``reg_mu`` are "auto" too, else 0 (Kull's
        ODIR, so that given strengths fit the papers' objective).
    penalise_intercept : bool
        L2 only: penalise the intercept with ``reg_lambda`` too.
    reference_class : bool
        Fix the last class's row of ``[W | b]`` at zero (softmax is unchanged by
        subtracting one row from all), so that the penalty falls on the other rows'
        differences from it, as Kull et al.'s dirichlet_python at the commit of their UCI
        study (``ref_row=True``: ``lambda * sum (w_i - w_k)^2`` over weights and intercepts
        with ``penalise_intercept``). The default (False) penalises ``[W | b]`` itself,
        which treats the classes alike. Newton solver only (up to 36 classes, log-loss).
    criterion : str or dict
        What to minimise, see `calbench.criteria`.
    max_iter : int
        The most L-BFGS iterations (Newton stops at its own tolerance).
    tol : float
        L-BFGS's gradient tolerance (see `TemperatureScaling`).
    warm_start : bool
        Start a refit from the previous solution (inner CV walks a grid so).
    solver : {"auto", "newton", "lbfgs"}
        "auto": Newton's method (`calbench.calibrators.newton`) for the log-loss with at
        most 36 classes, where the Hessian is small and L-BFGS can stall on badly scaled
        inputs; L-BFGS otherwise.
    start : {"auto", "diagonal", "temperature", "identity"}
        Where an L-BFGS fit of the log-loss begins (Newton always begins at the identity,
        a warm start at the previous solution). The objective is convex, so every start
        reaches its minimum; they differ in the length of the path, and their answers
        agree to the optimiser's tolerance, not to the last bit.

        - ``"temperature"``: ``W = I / T``, ``b = 0``, ``T`` the temperature scaling fit
          (one scalar; ``softmax(ln p / T) = softmax(z / T)`` serves both families).
        - ``"diagonal"``: the minimum of this objective with ``W`` held diagonal, found
          from the temperature at O(n k) a step instead of the full map's O(n k^2).
        - ``"auto"`` (default): ``"diagonal"`` where the penalty on an off-diagonal weight
          is at least `DIAGONAL_START_RATIO` times the log-loss's mean curvature in one
          weight at the temperature (the data can hardly move those weights, so the
          diagonal problem is nearly the whole one), else ``"temperature"``.
        - ``"identity"``: the uncalibrated map, as dirichletcal starts.

        Measured (seconds / L-BFGS steps, 2 cores; benchmarks/bench_dirichlet.py data):
        ImageNet shape 25000 x 1000, ms_odir at the default strengths: identity 252 /
        183, temperature 70 / 50, diagonal 32 / 10. CIFAR-100 shape 5000 x 100,
        lambda = mu = 1000: dir_odir identity 1.54 / 158, temperature 0.83 / 91,
        diagonal 1.31 / 118; ms_odir 0.59 / 56, 0.25 / 23, 0.40 / 27.
    device : str
        Where L-BFGS fits compute the log-loss and its gradient, as for
        `TemperatureScaling`; Newton fits (at most 36 classes) stay on the CPU.
    """

    def __init__(
        self,
        regularization="odir",
        reg_lambda="auto",
        reg_mu="auto",
        reg_diagonal="auto",
        reg_row_sum="auto",
        shrink_to="auto",
        criterion="nll",
        max_iter=2000,
        tol=1e-6,
        warm_start=False,
        solver="auto",
        penalise_intercept=False,
        reference_class=False,
        start="auto",
        device="cpu",
    ):
        self.device = device
        self.start = start
        self.regularization = regularization
        self.reference_class = reference_class
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.reg_diagonal = reg_diagonal
        self.reg_row_sum = reg_row_sum
        self.shrink_to = shrink_to
        self.penalise_intercept = penalise_intercept
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.solver = solver

    _parameter_constraints = {
        "reg_lambda": AutoOr(NON_NEGATIVE),
        "reg_mu": AutoOr(NON_NEGATIVE),
        "reg_diagonal": AutoOr(NON_NEGATIVE),
        "reg_row_sum": AutoOr(NON_NEGATIVE),
        "shrink_to": Choice("auto", "zero", "temperature"),
        "regularization": Choice("none", "l2", "odir"),
        "solver": Choice("auto", "newton", "lbfgs"),
        "start": Choice("auto", "diagonal", "temperature", "identity"),
    }

    def _initial_params(self, n_classes):
        return {"coef_": np.eye(n_classes), "intercept_": np.zeros(n_classes)}

    def default_strengths(self) -> str:
        if self.regularization == "odir":
            multiples = ", ".join(f"{m:g}" for m in DIAGONAL_STRENGTHS)
            return (
                f"lambda k^2(k-1)^2/2n, mu k^2/2n; diagonal pulled to TS's 1/T at the best of "
                f"({multiples}) x k^2/2n on a held-out {DIAGONAL_HOLDOUT:.0%}; row sums "
                "pulled to 1/T as intercepts"
            )
        if self.regularization == "l2":
            return "W pulled to TS's I/T (not 0) at lambda 5k/n; row sums to 1/T as intercepts"
        return "-"

    def _starting_params(self, logits, y):
        k = logits.shape[1]
        params = self._initial_params(k)
        if self.start == "identity" or self.criterion != "nll":
            return params
        temperature = self._temperature(logits, y)
        x, terms = self._features(logits), self._penalty_terms
        start = self.start
        if start == "auto":
            pinned = _diagonal_dominates(x, logits / temperature, terms[0])
            start = "diagonal" if pinned else "temperature"
        if start == "temperature":
            return {"coef_": params["coef_"] / temperature, "intercept_": params["intercept_"]}
        diagonal, intercept = _diagonal_minimum(
            x, y, temperature, terms, tol=self.tol, max_iter=self.max_iter
        )
        return {"coef_": np.diag(diagonal), "intercept_": intercept}

    def _temperature(self, logits, y) -> float:
        """Temperature scaling's fit of the calibration data, once a fit (``temperature_``):
        the start of L-BFGS and the centre of the diagonal's penalty."""
        if getattr(self, "temperature_", None) is None:
            self.temperature_ = TemperatureScaling().fit(logits, y).temperature_
        return self.temperature_

    def _resolve_strengths(self, n: int, k: int) -> None:
        """``reg_lambda_`` and ``reg_mu_``: the given strengths, or the class docstring's
        defaults for ``"auto"``."""
        kind = self.regularization
        auto_lambda = {"odir": (k * (k - 1)) ** 2 / (2 * n), "l2": 5 * k / n}.get(kind, 0.0)
        auto_mu = k**2 / (2 * n) if kind == "odir" else 0.0
        self.reg_lambda_ = auto_lambda if self.reg_lambda == "auto" else float(self.reg_lambda)
        self.reg_mu_ = auto_mu if self.reg_mu == "auto" else float(self.reg_mu)

    def _resolve_pulls(self, x, logits, y) -> None:
        """What the default strengths add to Kull's penalties (the class docstring):
        ``shrinks_to_temperature_`` (L2), ``row_pull_`` (weight and centre of the pull on
        each row's sum of weights) and ``reg_diagonal_`` (ODIR: the given strength, 0, or
        the multiple of ``k^2 / (2n)`` chosen on a held-out share, ``diagonal_scores_``).
        ``x``: the map's features of ``logits``."""
        n, k = logits.shape
        self.diagonal_scores_ = None
        given_diagonal = self.reg_diagonal != "auto" and float(self.reg_diagonal) > 0
        if given_diagonal and self.regularization != "odir":
            raise CalbenchError(
                f"{type(self).__name__}: reg_diagonal pulls ODIR's free diagonal towards "
                f"the temperature; regularization={self.regularization!r} has no free "
                "diagonal. Use regularization='odir' or leave reg_diagonal out."
            )
        odir_default = self.regularization == "odir" and "auto" == self.reg_lambda == self.reg_mu
        shrink_to = self.shrink_to
        if shrink_to == "auto":
            shrink_to = "temperature" if self.reg_lambda == "auto" else "zero"
        self.shrinks_to_temperature_ = self.regularization == "l2" and shrink_to == "temperature"
        l2_default = self.shrinks_to_temperature_ and self.reg_lambda == "auto"
        if self.reg_row_sum != "auto":
            weight = float(self.reg_row_sum)
        elif odir_default or l2_default:
            # Row i's sum of weights times a row's shared feature offset ``mean_j x_j`` is
            # a per-class term: pulled as an intercept is, the offset's mean square the
            # exchange rate (near 0 on logits; on ln p about -9.6 at ImageNet shape).
            per_intercept = self.reg_mu_ / k if odir_default else self.reg_lambda_
            weight = per_intercept * float(np.mean(x.mean(axis=1) ** 2))
        else:
            weight = 0.0
        self.row_pull_ = (weight, 1.0 / self._temperature(logits, y) if weight else 0.0)
        if self.reg_diagonal != "auto":
            self.reg_diagonal_ = float(self.reg_diagonal)
        elif odir_default:
            self.reg_diagonal_ = self._choose_diagonal_multiple(x, logits, y) * k**2 / (2 * n)
        else:
            self.reg_diagonal_ = 0.0
        if self.reg_diagonal_ > 0 or self.shrinks_to_temperature_:
            self._temperature(logits, y)  # the centre of the pull

    def _choose_diagonal_multiple(self, x, logits, y) -> float:
        n, k = logits.shape
        order = np.random.default_rng(0).permutation(n)
        cut = n - max(1, int(round(DIAGONAL_HOLDOUT * n)))
        fit, held = order[:cut], order[cut:]
        x_fit, y_fit, x_held, y_held = x[fit], y[fit], x[held], y[held]
        center = 1.0 / self._temperature(logits, y)
        unit = k**2 / (2 * cut)  # the rule's unit, and the intercept's default, at cut rows
        # A diagonal map's row sums are its diagonal: their pull (at cut rows) adds to it.
        row_weight = self.row_pull_[0] * n / cut
        d, b = np.full(k, center), np.zeros(k)
        scores = {}
        for multiple in DIAGONAL_STRENGTHS:
            # Strongest first, each fit starting from the last: a few steps each.
            d, b = _diagonal_fit(
                x_fit,
                y_fit,
                d,
                b,
                np.full(k, multiple * unit / k + row_weight),
                center,
                np.full(k, unit / k),
                tol=self.tol,
                max_iter=self.max_iter,
            )
            logp = log_softmax(x_held * d + b)
            scores[multiple] = float(-logp[np.arange(len(held)), y_held].mean())
        self.diagonal_scores_ = scores
        # The strongest of the best: a weaker pull must earn its freedom.
        best = min(scores.values())
        return next(m for m in DIAGONAL_STRENGTHS if scores[m] == best)

    def _fitting_features(self, logits):
        # At ImageNet shape (25000 x 1000) the two products per L-BFGS step are 25 GFLOP
        # each, 3 s in float64 on 2 cores and half that in float32. Their rounding (1e-7
        # relative) is far below what moves a printed metric; the parameters, the
        # log-loss and its gradient stay float64, and predictions use float64 features.
        x = self._features(logits)
        if x.shape[0] * x.shape[1] ** 2 >= _FLOAT32_PRODUCTS:
            return x.astype(np.float32)
        return x

    def _forward(self, params, x):
        coef = params["coef_"]
        if x.dtype == np.float32:
            # Widened and shifted in one pass over the 25M entries of ImageNet shape.
            product = x @ coef.astype(np.float32).T
            return np.add(product, params["intercept_"], dtype=np.float64)
        return x @ coef.T + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        if x.dtype == np.float32:
            # Cast the contiguous gradient, then let BLAS read it transposed: casting the
            # transposed view walks memory column by column.
            coef = (grad_out.astype(np.float32).T @ x).astype(np.float64)
        else:
            coef = grad_out.T @ x
        return {"coef_": coef, "intercept_": grad_out.sum(axis=0)}

    def _penalty_weights(self, k):
        """The penalty as weights of the squared entries of ``[W | b] - center`` (both are
        diagonal), with the strengths resolved."""
        weights = np.zeros((k, k + 1))
        if self.regularization == "l2":
            weights[:, : k + 1 if self.penalise_intercept else k] = self.reg_lambda_
        elif self.regularization == "odir":
            weights[:, :k] = self.reg_lambda_ / (k * (k - 1))
            weights[np.arange(k), np.arange(k)] = self.reg_diagonal_ / k
            weights[:, k] = self.reg_mu_ / k
        return weights

    def _penalty_center(self, k):
        """Where the penalty pulls ``[W | b]``: 0, or temperature scaling's map for ODIR's
        pulled diagonal and L2 with ``shrink_to`` the temperature."""
        center = np.zeros((k, k + 1))
        odir_pulled = self.regularization == "odir" and self.reg_diagonal_ > 0
        if odir_pulled or self.shrinks_to_temperature_:
            center[np.arange(k), np.arange(k)] = 1.0 / self.temperature_
        return center

    def _fit(self, logits, y):
        solver = self.solver
        k = logits.shape[1]
        _check_matrix_size(type(self).__name__, *logits.shape)
        self.temperature_ = None
        x = self._features(logits)  # once: ln p at ImageNet shape is 25M logarithms
        self._resolve_strengths(*logits.shape)
        self._resolve_pulls(x, logits, y)
        self._penalty_terms = (self._penalty_weights(k), self._penalty_center(k), self.row_pull_)
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
            weights, center, row_pull = self._penalty_terms
            a, self.n_iter_, self.loss_ = newton_multinomial(
                x,
                y,
                init,
                weights,
                free=free,
                center=center,
                row_pull=row_pull,
            )
        self.coef_, self.intercept_ = a[:, :k].copy(), a[:, k].copy()

    def _penalty(self, params):
        weights, center, row_pull = self._penalty_terms
        if not weights.any() and not row_pull[0]:
            return 0.0, {}
        k = weights.shape[0]
        a = np.hstack([params["coef_"], params["intercept_"][:, None]])
        gap = a - center
        value = float((weights * gap**2).sum())
        grad = 2 * weights * gap
        if row_pull[0]:
            row_value, row_grad = row_pull_terms(a, row_pull)
            value += row_value
            grad[:, :k] += row_grad[:, None]
        return value, {"coef_": grad[:, :k], "intercept_": grad[:, k]}


class DirichletCalibrator(MatrixScaling):
    __doc__ = (
        """Dirichlet calibration ``softmax(W ln p + b)`` (Kull et al. 2019, sec. 3): matrix
    scaling on log-probabilities, with the same parameters, penalties and defaults as
    `MatrixScaling`. Zero probabilities cannot arise: ``ln p`` is computed as
    ``log_softmax(z)``; data given as probabilities arrive as ``log(clip(p, 2.2e-308))``.
    ``make bench`` times it against dirichletcal's ``FullDirichletCalibrator``; the
    tests check the objective it minimises against a plain numpy one.

"""
        + "    Parameters\n"
        + MatrixScaling.__doc__.split("    Parameters\n", 1)[1]
    )

    input_kind = "probabilities"
