"""Temperature, bias-corrected temperature and vector scaling: one temperature, or a scale
and an intercept per class, on logits (Guo et al. 2017; Alexandari et al. 2020), fitted as
`calbench.calibrators.parametric` fits every map.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.constraints import Choice
from calbench.calibrators.parametric import (
    SCALING_PARAMETERS,
    ParametricCalibrator,
    exp_any,
    torch,
    warn_if_no_minimum,
)
from calbench.calibrators.solvers.lbfgs import warn_unconverged
from calbench.calibrators.solvers.newton import (
    NEWTON_MAX_CLASSES,
    NEWTON_VECTOR_MAX_CLASSES,
    newton_steps,
)
from calbench.calibrators.solvers.newton_vector import (
    newton_vector,
    vector_label_sums,
    vector_log_loss,
)
from calbench.calibrators.solvers.newton_vector_lean import LEAN_ENTRIES, chunk_probabilities
from calbench.calibrators.solvers.vector_lbfgs import fit_vector
from calbench.criteria import EXP_FLOOR
from calbench.simplex import TORCH_MIN_ENTRIES


class TemperatureScaling(ParametricCalibrator):
    __doc__ = (
        """``softmax(z / t)`` with one temperature ``t > 0`` (Guo et al. 2017; Valk 2.5.2).

    ``t`` is fitted as ``log t`` so it stays positive without bounds; ``temperature_`` is
    the fitted ``t``. Matches netcal's ``TemperatureScaling``
    (tests/calibrators/test_calibrators.py).
    """
        + SCALING_PARAMETERS
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
        return x * exp_any(-params["log_temperature_"])

    def _backward(self, params, x, out, grad_out):
        return {"log_temperature_": -(grad_out * out).sum()}

    def _data_term(self, criterion, x, y):
        """The log-loss and its derivative in the one parameter, without the (n, k)
        gradient the generic chain rule builds: one exponential pass in torch (5000 x 100:
        2.4 ms an evaluation against 6.6 ms). Small data (under `TORCH_MIN_ENTRIES`
        entries, every UCI set and 10-class network) keep the generic path, bit for bit."""
        if not self._fused_log_loss(x):
            return super()._data_term(criterion, x, y)
        features = torch.from_numpy(np.ascontiguousarray(x))
        label_mean = float(x[np.arange(len(y)), y].mean())

        def one_parameter(params):
            beta = float(exp_any(-params["log_temperature_"]))
            scaled = features * beta
            top = scaled.amax(dim=1, keepdim=True)
            # The floor keeps exp() out of subnormals (`calbench.criteria.nll`). In place:
            # one (n, k) array an evaluation, not three (the same numbers).
            weights = scaled.sub_(top).clamp_(min=EXP_FLOOR).exp_()
            norm = weights.sum(dim=1)
            value = float((norm.log() + top[:, 0]).mean()) - beta * label_mean
            slope = float((weights.mul_(features).sum(dim=1) / norm).mean()) - label_mean
            return value, {"log_temperature_": np.asarray(-beta * slope)}

        return one_parameter

    def _fused_log_loss(self, x) -> bool:
        """Whether the map's own one-pass log-loss serves ``x`` (`_data_term`)."""
        return self._cpu_log_loss() and x.size >= TORCH_MIN_ENTRIES and x.dtype == np.float64

    @property
    def temperature_(self) -> float:
        return float(np.exp(self.log_temperature_))

    def learned(self) -> dict:
        """As `Calibrator.learned`, the per-class intercepts centred (mean 0): the softmax
        ignores a shift they share, so only their differences are fitted, and a fit may
        end anywhere along that shift (VS on a 4-class file: about -2991 each). Centred,
        two fits' intercepts compare; the map itself is left as fitted."""
        out = super().learned()
        if isinstance(out.get("intercept_"), list):
            values = np.asarray(out["intercept_"], dtype=float)
            out["intercept_"] = (values - values.mean()).tolist()
        return out


class BiasCorrectedTemperatureScaling(TemperatureScaling):
    __doc__ = (
        """``softmax(z / t + b)``: a temperature plus one bias per class (Alexandari et al.
    2020; Ho 2.6.1); ``log_temperature_`` and ``intercept_`` are fitted.
    """
        + SCALING_PARAMETERS
    )

    _data_term = ParametricCalibrator._data_term

    def _initial_params(self, n_classes):
        return {"log_temperature_": np.zeros(()), "intercept_": np.zeros(n_classes)}

    def _fit(self, logits, y):
        warn_if_no_minimum(self, y, logits.shape[1])
        super()._fit(logits, y)

    def _forward(self, params, x):
        return x * exp_any(-params["log_temperature_"]) + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        scaled = out - params["intercept_"]
        return {"log_temperature_": -(grad_out * scaled).sum(), "intercept_": grad_out.sum(axis=0)}


class VectorScaling(TemperatureScaling):
    __doc__ = (
        """``softmax(w * z + b)``: one scale and one bias per class (Guo et al. 2017; Valk
    2.5.3); ``coef_`` (k,) and ``intercept_`` (k,) are fitted: under the log-loss on the
    CPU by Newton's method up to 1,000 classes, beyond by L-BFGS.
    """
        + SCALING_PARAMETERS
        + """    preconditioner : {"blocks", "none"}
        L-BFGS's coordinates for the log-loss on the CPU beyond Newton's class limit:
        ``"blocks"`` (the default) makes each class's 2 x 2 block of the Hessian the
        identity (`calbench.calibrators.solvers.preconditioners.ClassPairPreconditioner`; 20,000
        rows of 1,000 classes: 105 steps against 310); ``"none"`` fits the scales and
        intercepts themselves. Both reach the same minimum; the stored cells differ.
"""
    )

    def __init__(
        self,
        criterion="nll",
        max_iter=1000,
        tol=1e-6,
        warm_start=False,
        device="cpu",
        preconditioner="blocks",
    ):
        super().__init__(criterion, max_iter, tol, warm_start, device)
        self.preconditioner = preconditioner

    _parameter_constraints = {"preconditioner": Choice("blocks", "none")}

    def _data_term(self, criterion, x, y):
        """The log-loss on the CPU from `TORCH_MIN_ENTRIES` entries in one fused pass
        (`vector_log_loss`); elsewhere the generic chain rule (temperature scaling's
        one-parameter path is not ours)."""
        if not self._fused_log_loss(x):
            return ParametricCalibrator._data_term(self, criterion, x, y)
        label_sums = vector_label_sums(x, y)

        def fused(params):
            value, grad_w, grad_b, _ = vector_log_loss(
                params["coef_"], params["intercept_"], x, y, label_sums
            )
            return value, {"coef_": grad_w, "intercept_": grad_b}

        return fused

    def _initial_params(self, n_classes):
        return {"coef_": np.ones(n_classes), "intercept_": np.zeros(n_classes)}

    def _fit(self, logits, y):
        warn_if_no_minimum(self, y, logits.shape[1])
        if self._fits_by_newton(logits.shape[1]):
            self._fit_vector_by_newton(self._fitting_features(logits), y)
            return
        if self._cpu_log_loss() and self.preconditioner == "blocks":  # past Newton's limit
            self._fit_vector_preconditioned(logits, y)
        else:
            super()._fit(logits, y)

    def _fits_by_newton(self, n_classes: int) -> bool:
        """The log-loss on the CPU up to `NEWTON_VECTOR_MAX_CLASSES` classes: Newton's
        method on the 2k parameters (`newton_vector`), the same minimum as L-BFGS in a
        handful of steps; other criteria, accelerators and more classes take L-BFGS."""
        return self._cpu_log_loss() and n_classes <= NEWTON_VECTOR_MAX_CLASSES

    def _fit_vector_by_newton(self, x, y, pen_w=0.0, pen_b=0.0, log_probabilities=False):
        """Newton's method from the identity, or a warm start, or (VS beyond
        `NEWTON_MAX_CLASSES` classes) `scale_start`; ``log_probabilities``: `newton_vector`'s,
        used where the fit starts at the identity."""
        k = x.shape[1]
        w, b = np.ones(k), np.zeros(k)
        previous = getattr(self, "n_iter_", None) is not None and np.shape(self.coef_) == (k,)
        if self.warm_start and previous:
            w, b = np.asarray(self.coef_), np.asarray(self.intercept_)
            log_probabilities = False
        elif not np.any(pen_w) and k > NEWTON_MAX_CLASSES:  # scales unpenalised (VS, vs_logp)
            w, log_probabilities = np.full(k, scale_start(x, y)), False
        self.coef_, self.intercept_, self.n_iter_, self.loss_ = newton_vector(
            x,
            y,
            w,
            b,
            pen_w=pen_w,
            center_w=1.0,
            pen_b=pen_b,
            max_iter=newton_steps(self),
            on_unconverged=self.unconverged,
            log_probabilities=log_probabilities,
        )

    def _fit_vector_preconditioned(self, logits, y):
        start = self._start(logits, y)
        x = np.asarray(self._fitting_features(logits), dtype=np.float64)
        fit = fit_vector(
            x, y, start["coef_"], start["intercept_"], max_iter=self.max_iter, tol=self.tol
        )
        warn_unconverged(self, fit)
        self.coef_, self.intercept_ = fit.weights[0].copy(), fit.weights[1].copy()
        self.n_iter_, self.loss_, self.gradient_max_ = fit.n_iter, fit.loss, fit.gradient_max

    def _forward(self, params, x):
        return x * params["coef_"] + params["intercept_"]

    def _backward(self, params, x, out, grad_out):
        return {"coef_": (grad_out * x).sum(axis=0), "intercept_": grad_out.sum(axis=0)}


def scale_start(x, y, steps=3) -> float:
    """Vector scaling's start beyond `NEWTON_MAX_CLASSES` classes: a few of Newton's steps
    on one common scale ``beta`` of the logits (temperature scaling's problem, ``1 /
    beta``) from 1, each one exponential pass. From the identity, Newton's method on
    netcal's DenseNet-BC-100 CIFAR-100 took 10 steps (8 Hessians); from here 8 (7), the
    same minimum to its tolerance (the map within 1.2e-9). A start only: no stopping
    test beyond ``steps`` (a fitted temperature would cost twice as much)."""
    n, k = x.shape
    label_mean = float(x[np.arange(n), y].mean())
    beta = 1.0
    # Row chunks past LEAN_ENTRIES, as the fit then runs (no (n, k) array beside x); the
    # per-row sums are kept whole, so their means round as one array's.
    rows = n if x.size < LEAN_ENTRIES else max(1, LEAN_ENTRIES // k)
    z = np.empty((min(rows, n), k))
    first, second = np.empty(n), np.empty(n)
    for _ in range(steps):
        for start in range(0, n, rows):
            part = x[start : start + rows]
            zz = chunk_probabilities(part, beta, 0.0, z[: len(part)])  # softmax(beta x)
            first[start : start + rows] = np.einsum("ij,ij->i", zz, part)
            zz *= part
            second[start : start + rows] = np.einsum("ij,ij->i", zz, part)
        second -= first**2
        slope, curvature = float(first.mean()) - label_mean, float(second.mean())
        if not curvature > 0:
            break
        beta = max(beta - slope / curvature, beta / 2)  # (the scale stays positive)
    return beta


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "ts": (TemperatureScaling, {}),
    "bcts": (BiasCorrectedTemperatureScaling, {}),
    "vs": (VectorScaling, {}),
}
