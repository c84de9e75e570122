"""Matrix scaling and Dirichlet calibration: the full linear map ``softmax(W x + b)`` on
logits (``x = z``) or on log-probabilities (``x = ln softmax(z)``, Kull et al. 2019), with
L2 or ODIR regularisation, fitted as `calbench.calibrators.parametric` fits every map.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.constraints import NON_NEGATIVE, AutoOr, Choice
from calbench.calibrators.newton import (
    NEWTON_MAX_CLASSES,
    newton_multinomial,
    newton_steps,
    newton_vector,
    row_pull_terms,
)
from calbench.calibrators.parametric import (
    FLOAT32_PRODUCTS,
    LBFGS_COPIES,
    ParametricCalibrator,
    lbfgs,
    threads_for,
    warn_if_no_minimum,
    warn_unconverged,
)
from calbench.calibrators.preconditioned import PRECONDITIONERS, fit_multinomial
from calbench.calibrators.scaling import TemperatureScaling
from calbench.criteria import get_criterion
from calbench.device import reuse_transfers, to_device
from calbench.errors import CalbenchError
from calbench.simplex import log_softmax, softmax

DIAGONAL_START_RATIO = 10.0


def _diagonal_dominates(x, logits, temperature, weights, device=None) -> bool:
    """Whether the penalty pins the off-diagonal weights: its mean weight on them against
    the log-loss's mean second derivative in one weight ``w_ij`` at the temperature, about
    ``mean over samples of p_i (1 - p_i) x_j^2`` averaged over i and j (on ``device``
    where that is a GPU: 25M exponentials at ImageNet shape)."""
    k = x.shape[1]
    off = ~np.eye(k, dtype=bool)
    penalty = weights[:, :k][off].mean() if k > 1 else 0.0
    if device is None:
        p = softmax(logits / temperature)
        curvature = np.mean((p * (1 - p)).sum(axis=1) * (x**2).sum(axis=1)) / k**2
    else:
        import torch

        p = torch.softmax(to_device(logits, device, np.float64) / temperature, dim=1)
        x_t = to_device(x, device, np.float64)
        curvature = float(((p * (1 - p)).sum(dim=1) * (x_t**2).sum(dim=1)).mean()) / k**2
    return bool(penalty >= DIAGONAL_START_RATIO * curvature)


def _diagonal_minimum(x, y, temperature, terms, *, tol, max_iter, device=None):
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
        device=device,
    )


def _diagonal_fit(x, y, d, b, on_diagonal, center, on_intercept, *, tol, max_iter, device=None):
    """``(d, b)`` minimising ``log-loss(softmax(x * d + b)) + on_diagonal @ (d - center)^2
    + on_intercept @ b^2`` from the given ``(d, b)``: Newton's method up to
    `NEWTON_MAX_CLASSES` classes (log-probabilities of exact zeros stall L-BFGS), L-BFGS at
    O(n k) a step above, where Newton's 2k x 2k Hessian costs O(n k^2); its log-loss on
    ``device`` where that is a GPU (at ImageNet shape 0.3 to 0.6 s an evaluation on the
    CPU, six such fits in a default map's 37 s)."""
    k = x.shape[1]
    if k <= NEWTON_MAX_CLASSES:
        d, b, _, _ = newton_vector(
            x, y, d, b, pen_w=on_diagonal, center_w=center, pen_b=on_intercept, tol=tol * 1e-4
        )
        return d, b
    data_term = _diagonal_data_term(x, y, device)

    def objective(theta):
        scale, shift = theta[:k], theta[k:]
        value, scale_grad, shift_grad = data_term(scale, shift)
        value += on_diagonal @ (scale - center) ** 2 + on_intercept @ shift**2
        scale_grad = scale_grad + 2 * on_diagonal * (scale - center)
        return value, np.concatenate([scale_grad, shift_grad + 2 * on_intercept * shift])

    result = lbfgs(objective, np.concatenate([d, b]), max_iter=max_iter, tol=tol, ftol=tol * 1e-4)
    return result.x[:k], result.x[k:]


def _diagonal_data_term(x, y, device):
    """``(scale, shift) -> (log-loss of softmax(x * scale + shift), its gradients in both)``:
    numpy, or torch on ``device`` (the features sent there once)."""
    if device is None:
        nll = get_criterion("nll")

        def on_cpu(scale, shift):
            value, grad = nll(x * scale + shift, y)
            return value, (grad * x).sum(axis=0), grad.sum(axis=0)

        return on_cpu
    import torch

    features = to_device(x, device, np.float64)
    labels = to_device(np.asarray(y, dtype=np.int64), device)

    def on_device(scale, shift):
        scale_t = torch.from_numpy(scale).to(device).requires_grad_(True)
        shift_t = torch.from_numpy(shift).to(device).requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(features * scale_t + shift_t, labels)
        loss.backward()
        return float(loss.detach()), scale_t.grad.cpu().numpy(), shift_t.grad.cpu().numpy()

    return on_device


#: ``reg_diagonal="auto"``: the multiples of ``k^2 / (2n)`` it chooses among, strongest
#: first (100: the diagonal held at the temperature; 0: Kull's ODIR, the diagonal free).
DIAGONAL_STRENGTHS = (100.0, 10.0, 1.0, 0.1, 0.0)
#: The share of the calibration rows ``reg_diagonal="auto"`` holds out to choose.
DIAGONAL_HOLDOUT = 0.2


#: Classes up to which the ODIR and L2 maps' full k x k map is fitted. At 1,000 (ImageNet)
#: a default fit takes 35 to 40 s on 16 cores and its grid of strengths minutes; at 2,000
#: one copy of the parameters is 32 MB and a step costs n k^2 = 1e11 multiplications on
#: 25,000 rows; at 5,000, 200 MB a copy and 6e11 a step, over the hundreds of steps a weak
#: penalty takes and the grid's 181 fits: hours, so refused before any work. (SMS, whose
#: fixed strengths need one fit of a few steps, is bounded by memory instead:
#: `calbench.calibrators.structured.check_sms_memory`.)
MATRIX_MAX_CLASSES = 2000


def _check_matrix_size(owner: str, n: int, k: int) -> None:
    """Refuse a full k x k map beyond `MATRIX_MAX_CLASSES` classes, before any work, naming
    what it would cost and the maps that scale."""
    if k > MATRIX_MAX_CLASSES:
        copy_gb = k * (k + 1) * 8 / 1e9
        raise CalbenchError(
            f"{owner}: a full {k} x {k} map has {k * (k + 1):,} parameters "
            f"({copy_gb:.1f} GB a copy, {LBFGS_COPIES * copy_gb:.0f} GB for L-BFGS-B's "
            f"workspace of {LBFGS_COPIES} copies) and a step costs n k^2 = {n * k * k:.1e} "
            f"multiplications; it is fitted up to {MATRIX_MAX_CLASSES} classes. At {k} "
            "classes use sms (a full map whose fixed penalties need one fit of a few "
            "steps, where memory allows) or a map with a few parameters a class: svs, vs, "
            "ets or ts."
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

        (Their times: the docs' "Default strengths" page.)
    device : str
        Where L-BFGS fits compute the log-loss and its gradient, as for
        `TemperatureScaling`; Newton fits (at most 36 classes) stay on the CPU.
    preconditioner : {"blocks", "rows"}
        How L-BFGS beyond Newton's class limit is preconditioned
        (`calbench.calibrators.preconditioned`): ``"rows"`` models each class row's block
        of the Hessian as its diagonal plus one direction throughout; ``"blocks"`` (the
        default) takes the exact blocks from the second round of 200 steps on, where
        affordable (up to about 170 classes at 5,000 rows), which a weak penalty on
        log-probabilities needs (netcal's LeNet-5 CIFAR-100 at lambda = mu = 0.01: 1,156
        steps against 4,998). Both reach the same minimum; the stored cells of the two
        differ.
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
        preconditioner="blocks",
    ):
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
            pinned = _diagonal_dominates(x, logits, temperature, terms[0], self._accelerator())
            start = "diagonal" if pinned else "temperature"
        if start == "temperature":
            return {"coef_": params["coef_"] / temperature, "intercept_": params["intercept_"]}
        diagonal, intercept = _diagonal_minimum(
            x,
            y,
            temperature,
            terms,
            tol=self.tol,
            max_iter=self.max_iter,
            device=self._accelerator(),
        )
        return {"coef_": np.diag(diagonal), "intercept_": intercept}

    def _temperature(self, logits, y) -> float:
        """Temperature scaling's fit of the calibration data, once a fit (``temperature_``):
        the start of L-BFGS and the centre of the diagonal's penalty."""
        if getattr(self, "temperature_", None) is None:
            scaling = TemperatureScaling(device=self.device if self._accelerator() else "cpu")
            self.temperature_ = scaling.fit(logits, y).temperature_
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
                device=self._accelerator(),
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

    @reuse_transfers()  # the temperature, the diagonal and the map read one copy
    def _fit(self, logits, y):
        solver = self.solver
        k = logits.shape[1]
        _check_matrix_size(type(self).__name__, *logits.shape)
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
        )
        warn_unconverged(self, fit)
        self.coef_, self.intercept_ = fit.weights[:, :k].copy(), fit.weights[:, k].copy()
        self.n_iter_, self.loss_, self.gradient_max_ = fit.n_iter, fit.loss, fit.gradient_max

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
