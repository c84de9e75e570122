r"""Structured matrix and vector scaling (Berta, Holzmüller, Jordan and Bach, "Structured
matrix scaling for multi-class calibration", AISTATS 2026), as ``probmetrics`` fits them.

First temperature scaling (unregularised, on the log-loss), its probabilities mixed with the
uniform distribution at weight :math:`c = 1/(n+1)` as probmetrics' ``ts-mix`` does (``n``
the calibration samples; this bounds every log-probability below by about
:math:`-\ln(nk)`); then, on those log-probabilities
:math:`x = \ln((1-c)\,\mathrm{softmax}(z / T) + c/k)`, the map
:math:`\mathrm{softmax}(W x + b)` with :math:`W = I + \mathrm{diag}(v) + M` (``sms``; M off the
diagonal) or :math:`W = I + \mathrm{diag}(v)` (``svs``), minimising

.. math::

    \frac1n \sum_i -\ln \mathrm{softmax}(W x_i + b)_{y_i}
    + \lambda_b \frac{k^\rho}{n^\tau} \|b\|^2 + \lambda_d \frac{k^\rho}{n^\tau} \|v\|^2
    + \lambda_o \frac{(k(k-1))^\rho}{n^\tau} \|M\|^2

(ridge penalties that shrink towards temperature scaling and scale with the number of
classes ``k`` and samples ``n``; the paper's defaults are all 1). Differences from
``probmetrics`` 1.3's ``SMSCalibrator``/``SVSCalibrator`` (``opt="bfgs"``, ``penalty=
"ridge"``): calbench keeps the log-probabilities in float64 where probmetrics rounds the
probabilities to float32 and clips their logs at ln(float32 tiny) = -87.3 (only
probabilities below 1e-38 differ), and fits by scipy's L-BFGS-B with closed-form gradients
instead of torchmin's BFGS; the maps agree to about 1e-6 (tests/calibrators/test_structured.py).
Their SAGA solver and non-ridge penalties (lasso, MCP, group lasso) are not implemented.
SMS's W is a full k x k map: beyond Newton's 36 classes, above 1,000 classes or from 5e6
features (25,000 x 200), or where scipy's fit would not fit in the memory available
(`check_sms_memory`: at 10,000 classes on 25,000 rows about 56 GB), it takes a lean path
(`fit_multinomial_lean`: the objective on row chunks, L-BFGS with 5 float32 corrections,
the warm start by class-pair L-BFGS; 13.2 GB measured there, the data included, in 964 s
on 2 loaded cores, converged), and where that would not fit either it is refused before
any work.

The default strengths are the paper's, unlike the ODIR and L2 maps' data-chosen ones, so
``sms`` and ``svs`` stay the paper's methods and CalArena's numbers. At the ImageNet shape
where fixed strengths can do harm (`benchmarks/bench_defaults.py`; 25,000 + 25,000 rows,
1000 classes, labels 23% redrawn) SMS gives back what its temperature gains: held-out
log-loss minus uncalibrated +0.00019, -0.00027, +0.00006 over data seeds 0, 1, 2, each
with a paired standard error of 0.0010 (TS -0.0029, SVS -0.0039 on seed 0).
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.constraints import Choice
from calbench.calibrators.matrix.matrix_scaling import MatrixScaling
from calbench.calibrators.matrix.sms_memory import check_sms_memory
from calbench.calibrators.matrix.svs_log_loss import buffered_applies, buffered_vector_log_loss
from calbench.calibrators.parametric import ParametricCalibrator
from calbench.calibrators.scaling.temperature import TemperatureScaling, VectorScaling
from calbench.calibrators.solvers.memory import packed_features
from calbench.calibrators.solvers.multinomial_lean import (
    Ridge,
    fit_multinomial_lean,
)
from calbench.calibrators.solvers.newton import NEWTON_MAX_CLASSES, newton_multinomial, newton_steps
from calbench.calibrators.solvers.newton_vector import newton_vector
from calbench.calibrators.solvers.newton_vector_lean import LEAN_ENTRIES
from calbench.calibrators.solvers.preconditioned import (
    PRECISIONS,
    PRECONDITIONERS,
    fit_multinomial,
)
from calbench.calibrators.solvers.threads import blas_threads
from calbench.calibrators.solvers.vector_lbfgs import fit_vector
from calbench.simplex import log_in_place, softmax_over

#: The gradient at which SMS's diagonal warm start stops (`_fit_matrix_by_scaledlbfgs`).
WARM_START_TOL = 1e-4


class StructuredScaling(ParametricCalibrator):
    """SMS (``structure="matrix"``) or SVS (``structure="vector"``) of Berta et al.
    (module docstring); ``temperature_``, ``uniform_weight_`` (1 / (n + 1)), ``coef_`` (W,
    or its diagonal for SVS) and ``intercept_`` (b) are fitted.

    Parameters
    ----------
    structure : {"matrix", "vector"}
        SMS (full W) or SVS (diagonal W).
    lambda_intercept, lambda_diagonal, lambda_off_diagonal : float
        The penalties' base strengths (the paper's defaults: 1).
    rho, tau : float
        How the strengths scale with the classes (``k^rho``) and the samples (``n^-tau``).
    criterion : str or dict
        What the map after the temperature minimises (`calbench.criteria`; ``nll``, the
        paper's). The temperature is always fitted on the log-loss.
    max_iter : int
        The most L-BFGS iterations.
    tol : float
        L-BFGS's gradient tolerance (see `TemperatureScaling`).
    warm_start : bool
        Start a refit from the previous solution.
    device : str
        Where the log-loss and its gradient are computed (see `TemperatureScaling`).
    preconditioner : {"blocks", "rows"}
        How L-BFGS beyond Newton's class limit is preconditioned, as `MatrixScaling`'s.
    precision : {"float64", "float32"}
        SMS's products beyond Newton's class limit, as `MatrixScaling`'s: ``"float32"``
        stops at a largest gradient entry of at least 1e-6 (``tol``'s default is 1e-8).
        On netcal's DenseNet-BC-100 CIFAR-100 its test log-loss is within 1e-7 of the
        float64 fit's; ``docs/performance.md`` has the figures. SVS ignores it, and so
        does the lean path (float64 throughout).
    lean : {"auto", "always", "never"}
        SMS's lean path (`fit_multinomial_lean`: the rows in chunks, 5 float32
        corrections, the warm start by `fit_vector`): ``"auto"`` takes it above
        `LEAN_ABOVE_CLASSES` (1,000) classes and from `LEAN_FROM_ENTRIES` (5e6)
        features in float64, where it is faster (ImageNet's 25,000 x 1,000:
        11.5 s against scipy's path's 15.1), and at any size where scipy's path would not
        fit in the memory available and it does (`check_sms_memory`), so CIFAR-100's
        5,000 x 100 keeps its numbers; ``"always"`` at any size (the log-loss on the
        CPU); ``"never"`` refuses where scipy's path would not fit. Its minimum is the same to the
        tolerance, not to the bit (``docs/performance.md``).
    """

    _parameter_constraints = {
        "structure": Choice("matrix", "vector"),
        "preconditioner": PRECONDITIONERS,
        "precision": PRECISIONS,
        "lean": Choice("auto", "always", "never"),
    }

    def default_strengths(self) -> str:
        return (
            "the paper's (kept, as CalArena runs them): every lambda = 1, scaled by "
            "k^rho n^-tau with rho = tau = 1"
        )

    def __init__(
        self,
        structure="matrix",
        lambda_intercept=1.0,
        lambda_diagonal=1.0,
        lambda_off_diagonal=1.0,
        rho=1.0,
        tau=1.0,
        criterion="nll",
        max_iter=2000,
        tol=1e-8,
        warm_start=False,
        device="cpu",
        preconditioner="blocks",
        precision="float64",
        lean="auto",
    ):
        self.lean = lean
        self.precision = precision
        self.preconditioner = preconditioner
        self.structure = structure
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.lambda_off_diagonal = lambda_off_diagonal
        self.rho = rho
        self.tau = tau
        self.criterion = criterion
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.device = device

    def _matrix(self) -> bool:
        return self.structure == "matrix"

    def _features(self, logits):
        mix = self.uniform_weight_
        probs = softmax_over(logits / self.temperature_)
        probs *= 1 - mix
        probs += mix / logits.shape[1]
        return log_in_place(probs)

    def _fit(self, logits, y):
        n, k = logits.shape
        lean = False
        if self._matrix() and self._accelerator() is None:
            if k > NEWTON_MAX_CLASSES or self.lean == "always":  # scipy's L-BFGS-B, or lean
                lean = check_sms_memory(n, k, self.lean, self._cpu_log_loss(), self.precision)
        self.temperature_ = TemperatureScaling().fit(logits, y).temperature_
        self.uniform_weight_ = 1.0 / (n + 1)
        scale = k**self.rho / n**self.tau
        self.penalties_ = {
            "intercept": self.lambda_intercept * scale,
            "diagonal": self.lambda_diagonal * scale,
            "off_diagonal": self.lambda_off_diagonal * (k * (k - 1)) ** self.rho / n**self.tau,
        }
        if self._cpu_log_loss() and self._matrix():
            x = self._fitting_features(logits)
            if lean:
                x = packed_features(x)  # (no second copy of the features held)
                self._fit_matrix_lean(x, y)
            elif k <= NEWTON_MAX_CLASSES:
                self._fit_matrix_by_newton(x, y)
            else:
                if self.precision == "float64":  # [x | 1] with no second copy of x
                    x = packed_features(x)
                self._fit_matrix_by_scaledlbfgs(x, y)
            return
        if not self._matrix() and VectorScaling._fits_by_newton(self, k):
            x, lam = self._fitting_features(logits), self.penalties_
            args = (lam["diagonal"], lam["intercept"], True)  # its features: log-probabilities
            VectorScaling._fit_vector_by_newton(self, x, y, *args)
            return
        super()._fit(logits, y)

    def _data_term(self, criterion, x, y):
        """SVS's log-loss beyond Newton's class limit in one (n, k) buffer kept across
        evaluations (`buffered_vector_log_loss`: the generic chain rule's numbers, bit for
        bit, without its three fresh (n, k) arrays an evaluation). Elsewhere (SMS, other
        criteria, accelerators, arrays too small for torch's pass) the generic path."""
        fused = not self._matrix() and self._cpu_log_loss()
        if not (fused and buffered_applies(x)):
            return super()._data_term(criterion, x, y)
        return buffered_vector_log_loss(x, y)

    def _penalty_matrix(self, k):
        """The ridge weights of ``[W - I | b]``'s entries."""
        lam = self.penalties_
        penalty = np.full((k, k + 1), lam["off_diagonal"])
        penalty[np.arange(k), np.arange(k)] = lam["diagonal"]
        penalty[:, k] = lam["intercept"]
        return penalty

    def _fit_matrix_by_scaledlbfgs(self, x, y):
        """SMS beyond `NEWTON_MAX_CLASSES` classes: L-BFGS on ``[W - I | b]`` from the
        diagonal minimum (`newton_vector`), in preconditioned coordinates
        (`calbench.calibrators.solvers.preconditioned`). The ridge on the k(k-1) off-diagonal
        weights is far stiffer than the data's pull on the diagonal, and the features
        (log-probabilities) of one row move together: plain L-BFGS needs 85 steps on
        netcal's DenseNet-BC-100 CIFAR-100 (2.7 s), scaled by the Hessian's diagonal 31
        evaluations, preconditioned 18 (WideResNet-16-4: 28 and 16; LeNet-5: 46 and 14),
        each ending at an equal or lower objective."""
        k = x.shape[1]
        lam = self.penalties_
        # A starting point only, so Newton stops at a loose gradient (a step fewer: at
        # 1,000 classes 14.8 s against 18.7 s for the fit, the same objective to 15 digits).
        # (below `LEAN_ENTRIES` whole-array passes, on contiguous features as before)
        start = x if x.size >= LEAN_ENTRIES else np.ascontiguousarray(x)
        with blas_threads(1):
            w, b, _, _ = newton_vector(
                start,
                y,
                np.ones(k),
                np.zeros(k),
                pen_w=lam["diagonal"],
                pen_b=lam["intercept"],
                tol=WARM_START_TOL,
                log_probabilities=True,
            )
        a0 = np.zeros((k, k + 1))
        a0[np.arange(k), np.arange(k)] = w - 1.0
        a0[:, k] = b
        fit = fit_multinomial(
            x,
            y,
            a0,
            self._penalty_matrix(k),
            offset=x,
            max_iter=self.max_iter,
            tol=self.tol,
            blocks=self.preconditioner == "blocks",
            precision=self.precision,
            streamlined=True,
        )
        a = fit.weights
        self.coef_, self.intercept_ = a[:, :k] + np.eye(k), a[:, k].copy()
        self.n_iter_, self.loss_, self.gradient_max_ = fit.n_iter, fit.loss, fit.gradient_max

    def _fit_matrix_lean(self, x, y):
        """SMS above 1,000 classes, from 5e6 features, or where `_fit_matrix_by_scaledlbfgs`
        would not fit in memory (`check_sms_memory`): the same objective from the same
        kind of start to the same gradient test, by `fit_multinomial_lean` (row chunks, 5
        float32 corrections), from the diagonal minimum by `fit_vector`'s class-pair
        L-BFGS (Newton's 2k x 2k Hessian would be 3.2 GB at 10,000 classes, 10 GB with its
        sum and factors)."""
        k = x.shape[1]
        lam = self.penalties_
        start = fit_vector(
            x,
            y,
            np.ones(k),
            np.zeros(k),
            tol=WARM_START_TOL,
            pen_w=lam["diagonal"],
            pen_b=lam["intercept"],
        )
        ridge = Ridge(lam["off_diagonal"], lam["diagonal"], lam["intercept"])
        w, b = start.weights
        fit = fit_multinomial_lean(x.base, y, w, b, ridge, max_iter=self.max_iter, tol=self.tol)
        a = fit.weights
        a[np.arange(k), np.arange(k)] += 1.0
        self.coef_, self.intercept_ = np.ascontiguousarray(a[:, :k]), a[:, k].copy()
        self.n_iter_, self.loss_, self.gradient_max_ = fit.n_iter, fit.loss, fit.gradient_max

    def _fit_matrix_by_newton(self, x, y):
        """SMS's objective by Newton's method (at most `NEWTON_MAX_CLASSES` classes): the
        weights ``[W - I | b]`` on the features, with ``x`` itself as a fixed offset, so the
        ridge penalties pull towards the identity as the paper's do."""
        k = x.shape[1]
        penalty = self._penalty_matrix(k)
        init = np.zeros((k, k + 1))
        if self.warm_start and getattr(self, "n_iter_", None) is not None:
            if np.shape(self.coef_) == (k, k):
                init = np.hstack([self.coef_ - np.eye(k), self.intercept_[:, None]])
        a, self.n_iter_, self.loss_ = newton_multinomial(
            x,
            y,
            init,
            penalty,
            offset=x,
            max_iter=newton_steps(self),
            on_unconverged=self.unconverged,
        )
        self.coef_, self.intercept_ = a[:, :k] + np.eye(k), a[:, k].copy()

    def _initial_params(self, n_classes):
        coef = np.eye(n_classes) if self._matrix() else np.ones(n_classes)
        return {"coef_": coef, "intercept_": np.zeros(n_classes)}

    def _map(self):
        """The map whose forward pass and chain rule this one's are (same parameters)."""
        return MatrixScaling if self._matrix() else VectorScaling

    def _forward(self, params, x):
        return self._map()._forward(self, params, x)

    def _backward(self, params, x, out, grad_out):
        return self._map()._backward(self, params, x, out, grad_out)

    def _penalty(self, params):
        w, b = params["coef_"], params["intercept_"]
        lam = self.penalties_
        if w.ndim == 1:
            delta, off = w - 1.0, np.zeros(0)
        else:
            delta = np.diag(w) - 1.0
            off = w - np.diag(np.diag(w))
        value = (
            lam["intercept"] * (b**2).sum()
            + lam["diagonal"] * (delta**2).sum()
            + lam["off_diagonal"] * (off**2).sum()
        )
        grad_w = 2 * lam["diagonal"] * delta
        if w.ndim == 2:
            grad_w = np.diag(grad_w) + 2 * lam["off_diagonal"] * off
        return value, {"coef_": grad_w, "intercept_": 2 * lam["intercept"] * b}


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "sms": (StructuredScaling, {"structure": "matrix"}),
    "svs": (StructuredScaling, {"structure": "vector"}),
}
