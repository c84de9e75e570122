"""Matrix scaling's penalties: Kull et al.'s L2 and ODIR regularisers, the strengths calbench's
defaults give them (`MatrixScaling`'s docstring), the pull of each row's sum of weights and of
the diagonal towards temperature scaling's map, as the weights and centre of a quadratic
penalty on ``[W | b]`` that the solvers (`calbench.calibrators.solvers`) take."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.scaling.temperature import TemperatureScaling
from calbench.calibrators.solvers.diagonal import (
    DIAGONAL_HOLDOUT,
    DIAGONAL_STRENGTHS,
    choose_diagonal_multiple,
)
from calbench.calibrators.solvers.newton import row_pull_terms
from calbench.errors import CalbenchError


class MatrixPenalties:
    """The penalty half of `MatrixScaling` (a mixin before `ParametricCalibrator`): resolves
    the strengths and pulls a fit uses (``reg_lambda_``, ``reg_mu_``, ``reg_diagonal_``,
    ``row_pull_``, ``shrinks_to_temperature_``) and evaluates the penalty."""

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
        """``reg_diagonal="auto"``'s multiple of ``k^2 / (2n)``, chosen on a held-out share
        (`choose_diagonal_multiple`); the held-out log-loss of each in ``diagonal_scores_``."""
        best, self.diagonal_scores_ = choose_diagonal_multiple(
            x,
            y,
            1.0 / self._temperature(logits, y),
            self.row_pull_[0],
            tol=self.tol,
            max_iter=self.max_iter,
            device=self._accelerator(),
        )
        return best

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
