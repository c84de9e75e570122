"""Matrix scaling and Dirichlet calibration: the full linear map ``softmax(W x + b)`` on
logits (``x = z``) or on log-probabilities (``x = ln softmax(z)``, Kull et al. 2019), with
L2 or ODIR regularisation, fitted as `calbench.calibrators.parametric` fits every map.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.constraints import NON_NEGATIVE, AutoOr, Choice
from calbench.calibrators.matrix.penalties import MatrixPenalties
from calbench.calibrators.parametric import ParametricCalibrator, warn_if_no_minimum
from calbench.calibrators.solvers.diagonal import (
    diagonal_dominates,
    diagonal_minimum,
)
from calbench.calibrators.solvers.lbfgs import (
    FLOAT32_PRODUCTS,
    threads_for,
    warn_unconverged,
)
from calbench.calibrators.solvers.memory import check_matrix_size
from calbench.calibrators.solvers.newton import (
    NEWTON_MAX_CLASSES,
    newton_multinomial,
    newton_steps,
)
from calbench.calibrators.solvers.preconditioned import (
    PRECISIONS,
    PRECONDITIONERS,
    fit_multinomial,
)
from calbench.device import reuse_transfers
from calbench.errors import CalbenchError


class MatrixScaling(MatrixPenalties, ParametricCalibrator):
    r"""``softmax(W z + b)`` on logits, with optional L2 or ODIR regularisation.

    ODIR (Kull sec. 3) penalises off-diagonal weights and intercepts separately:

    .. math::

        \lambda \frac{1}{k(k-1)} \sum_{i \ne j} w_{ij}^2 + \mu \frac{1}{k} \sum_j b_j^2

    L2 penalises all weights but not the intercept, ``lambda * sum_ij w_ij^2``, which is
    scikit-learn's multinomial ``LogisticRegression`` with ``C = 1 / (2 n lambda)``; with
    ``penalise_intercept=True`` also ``lambda * sum_j b_j^2``, as the Keras Dir-L2 of Kull
    et al.'s deep-net experiments (``l2(lambda)`` on kernel and bias).

    The default strengths (``"auto"``) scale with the number of classes ``k`` and of samples
    ``n``, each a Gaussian prior on the summed log-likelihood whose variance is shared out
    over the weights it covers: ODIR ``reg_lambda = k^2 (k-1)^2 / (2n)``, ``reg_mu = k^2 /
    (2n)``, the diagonal pulled towards temperature scaling's ``1 / T`` at a strength chosen
    on a held-out share (`DIAGONAL_STRENGTHS`, `DIAGONAL_HOLDOUT`); L2 ``reg_lambda = 5k / n``
    pulling ``W`` towards ``I / T``; each row's sum of weights pulled towards ``1 / T``. A
    map made with no arguments then does no harm at any ``k`` (why each, with the
    measurements: the docs' "Default strengths" page). The values used are kept as
    ``reg_lambda_``, ``reg_mu_``, ``reg_diagonal_`` and ``row_pull_``. ``calbench run``
    searches the papers' grids by inner CV instead (``conf/method/*.yaml``), with the
    diagonal free as the papers have it.

    References: Kull et al. 2019, Beyond temperature scaling (NeurIPS), sec. 3.

    Examples
    --------
    >>> from calbench.data import load_dataset
    >>> data = load_dataset("synthetic_dirichlet", seed=0)
    >>> ms = MatrixScaling(regularization="odir", reg_lambda=1e-3, reg_mu=1e-3)
    >>> ms.fit(data.logits_cal, data.y_cal).predict_proba(data.logits_test).shape
    (100000, 3)

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
        "auto": Newton's method (`calbench.calibrators.solvers.newton`) for the log-loss with at
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

        (Their times: the docs' "Default strengths" page.)
    device : str
        Where L-BFGS fits compute the log-loss and its gradient, as for
        `TemperatureScaling`; Newton fits (at most 36 classes) stay on the CPU.
    preconditioner : {"blocks", "rows"}
        How L-BFGS beyond Newton's class limit is preconditioned
        (`calbench.calibrators.solvers.preconditioned`): ``"rows"`` models each class row's block
        of the Hessian as its diagonal plus one direction throughout; ``"blocks"`` (the
        default) takes the exact blocks from the second round of 200 steps on, where
        affordable (up to about 170 classes at 5,000 rows), which a weak penalty on
        log-probabilities needs (netcal's LeNet-5 CIFAR-100 at lambda = mu = 0.01: 1,156
        steps against 4,998). Both reach the same minimum; the stored cells of the two
        differ.
    precision : {"float64", "float32"}
        The dtype of the two products of each evaluation of that preconditioned L-BFGS
        (`calbench.calibrators.solvers.preconditioned.fit_multinomial`): ``"float64"`` (the
        default, every stored number's) or ``"float32"``: features and the step from
        each round's start in float32, the logits at that start, the softmax, the
        objective and its gradient's sums of rows widened to float64, and the gradient
        test at least 1e-6 (float32's products resolve the gradient to about 1e-8). Other
        solvers (Newton up to 36 classes) ignore it.
    """

    # A full linear map of log-probabilities sharpens a confident row past 1 - 1e-12: 2 test
    # rows of DenseNet-40 CIFAR-10 under dir_l2_kull_uci's weakest default penalty.
    _certainty = "possible"
    _certainty_source = (
        "The map sharpened the most confident scores; a stronger penalty keeps them off."
    )

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
        preconditioner="blocks",
        precision="float64",
    ):
        self.precision = precision
        self.device = device
        self.start = start
        self.preconditioner = preconditioner
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
        "preconditioner": PRECONDITIONERS,
        "precision": PRECISIONS,
        "start": Choice("auto", "diagonal", "temperature", "identity"),
    }

    def _initial_params(self, n_classes):
        return {"coef_": np.eye(n_classes), "intercept_": np.zeros(n_classes)}

    def _starting_params(self, logits, y):
        k = logits.shape[1]
        params = self._initial_params(k)
        if self.start == "identity" or self.criterion != "nll":
            return params
        temperature = self._temperature(logits, y)
        x, terms = self._features(logits), self._penalty_terms
        start = self.start
        if start == "auto":
            pinned = diagonal_dominates(x, logits, temperature, terms[0], self._accelerator())
            start = "diagonal" if pinned else "temperature"
        if start == "temperature":
            return {"coef_": params["coef_"] / temperature, "intercept_": params["intercept_"]}
        diagonal, intercept = diagonal_minimum(
            x,
            y,
            temperature,
            terms,
            tol=self.tol,
            max_iter=self.max_iter,
            device=self._accelerator(),
        )
        return {"coef_": np.diag(diagonal), "intercept_": intercept}

    def _fitting_features(self, logits):
        # At ImageNet shape (25000 x 1000) the two products per L-BFGS step are 25 GFLOP
        # each, 3 s in float64 on 2 cores and half that in float32. Their rounding (1e-7
        # relative) is far below what moves a printed metric; the parameters, the
        # log-loss and its gradient stay float64, and predictions use float64 features.
        x = self._features(logits)
        if x.shape[0] * x.shape[1] ** 2 >= FLOAT32_PRODUCTS:
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

    @reuse_transfers()  # the temperature, the diagonal and the map read one copy
    def _fit(self, logits, y):
        solver = self.solver
        k = logits.shape[1]
        check_matrix_size(type(self).__name__, *logits.shape)
        self.temperature_ = None
        x = self._features(logits)  # once: ln p at ImageNet shape is 25M logarithms
        self._resolve_strengths(*logits.shape)
        self._resolve_pulls(x, logits, y)
        self._penalty_terms = (self._penalty_weights(k), self._penalty_center(k), self.row_pull_)
        warn_if_no_minimum(self, y, k, unpenalised=self._penalty_terms[0][:, k] == 0)
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
            if self._preconditioned(solver, x):
                return self._fit_preconditioned(logits, x, y)
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
        with threads_for(logits.shape[0] * (k * (k + 1)) ** 2):
            weights, center, row_pull = self._penalty_terms
            a, self.n_iter_, self.loss_ = newton_multinomial(
                x,
                y,
                init,
                weights,
                free=free,
                max_iter=newton_steps(self),
                on_unconverged=self.unconverged,
                center=center,
                row_pull=row_pull,
            )
        self.coef_, self.intercept_ = a[:, :k].copy(), a[:, k].copy()

    def _preconditioned(self, solver, x) -> bool:
        """Whether this fit runs `fit_multinomial` (the log-loss beyond Newton's class
        limit, on a GPU, or on the CPU with float64 products, i.e. below
        `FLOAT32_PRODUCTS`): ``solver="auto"``'s choice there; ``"lbfgs"`` keeps plain
        L-BFGS in the map's own coordinates."""
        small = x.shape[0] * x.shape[1] ** 2 < FLOAT32_PRODUCTS
        return (
            solver == "auto"
            and self.criterion == "nll"
            and (small or self._accelerator() is not None)
        )

    def _fit_preconditioned(self, logits, x, y):
        k = logits.shape[1]
        start = self._start(logits, y)
        weights, center, row_pull = self._penalty_terms
        fit = fit_multinomial(
            np.asarray(x, dtype=np.float64),
            y,
            np.hstack([start["coef_"], start["intercept_"][:, None]]),
            weights,
            center=center,
            row_pull=row_pull,
            max_iter=self.max_iter,
            tol=self.tol,
            device=self._accelerator(),
            blocks=self.preconditioner == "blocks",
            precision=self.precision,
        )
        warn_unconverged(self, fit)
        self.coef_, self.intercept_ = fit.weights[:, :k].copy(), fit.weights[:, k].copy()
        self.n_iter_, self.loss_, self.gradient_max_ = fit.n_iter, fit.loss, fit.gradient_max


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "ms_odir": (MatrixScaling, {"regularization": "odir"}),
}
