"""CalArena's binary methods as its code computes them, where its float32 arithmetic moves a
printed digit (probkit/CalArena ``run_benchmark.py``'s ``BINARY_CALIBRATORS``, probmetrics
1.3), for the procedure twin ``calarena_cv_binary_procedure``. CalArena scores each method's
``predict_proba`` in the dtype it returns (``torch.tensor(preds_test)``): float32 for
probmetrics' Kernel and XGBoost, so their ECE bins float32 confidences
(`calbench.papers.calarena2026.ece`).

- `SklearnLogitScaling`: Platt-logits and Quadratic, scikit-learn's ``LogisticRegression``
  (L-BFGS at its default tolerance 1e-4, no penalty) on class 1's float32 log-odds features
  cast to float64, where calbench's ``platt_logits`` and ``quadratic`` fit the same map to
  the optimum.
- `PackageVennAbers`: Venn-Abers as probmetrics' ``BinaryVennAbersCalibrator`` runs the
  venn-abers package: one binary predictor on class 1's float32 probability, where
  calbench's ``venn_abers_calarena`` (CalArena's multiclass Venn-Abers) fits one per class.
- `Float32DirichletKernel` and `Float32Boosted`: calbench's ``kernel_nw`` and ``xgboost``
  with their predictions rounded to float32, as probmetrics returns them.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import binary_columns, renormalised
from calbench.calibrators.boosted.trees import BoostedCalibrator
from calbench.calibrators.constraints import Choice
from calbench.calibrators.float32 import calarena_probabilities
from calbench.calibrators.neighbourhood.dirichlet_kernel import DirichletKernel
from calbench.calibrators.optional import optional_module


def calarena_binary_features(p1: np.ndarray, features: str) -> np.ndarray:
    """probmetrics' ``BinaryLogisticCalibrator`` features of class 1's float32 probability:
    ``s = ln p - ln(1 - p)`` (each log clipped at ln of float32's tiny, in float32), then
    ``(1, s)`` (affine) or ``(1, s, s^2)`` (quadratic), float32 columns."""
    p1 = np.asarray(p1, dtype=np.float32).reshape(-1)
    limit = np.log(np.finfo(np.float32).tiny)
    with np.errstate(divide="ignore"):
        log_p = np.clip(np.log(p1), limit, -limit).reshape(-1, 1)
        log_q = np.clip(np.log1p(-p1), limit, -limit).reshape(-1, 1)
    s = log_p - log_q
    columns = [np.ones_like(s), s] + ([np.square(s)] if features == "quadratic" else [])
    return np.hstack(columns)


class _ClassOneOrEach(Calibrator):
    """On two classes one binary fit on class 1's stored float32 probability, its rows as
    the package returns them (CalArena's); on more (the estimator contract: CalArena runs
    these on two classes only) one per class against the rest, renormalised. A class whose
    outcomes are all equal predicts their frequency. Subclasses give ``_fit_one(p,
    outcomes)`` and ``_apply_one(model, p) -> (n, 2) rows``."""

    input_kind = "probabilities"

    def _fit(self, logits, y):
        probs, y = calarena_probabilities(logits), np.asarray(y)
        self.maps_ = []
        for j in binary_columns(probs.shape[1]):
            outcomes = (y == j).astype(int)
            rate = float(outcomes.mean())
            constant = rate in (0.0, 1.0)
            self.maps_.append(rate if constant else self._fit_one(probs[:, j], outcomes))

    def _predict_proba(self, logits):
        probs = calarena_probabilities(logits)
        rows = [
            np.tile([1.0 - m, m], (len(probs), 1))
            if isinstance(m, float)
            else self._apply_one(m, probs[:, j])
            for j, m in zip(binary_columns(probs.shape[1]), self.maps_, strict=True)
        ]
        if len(rows) == 1:
            return rows[0]
        return renormalised(np.column_stack([r[:, 1] for r in rows]))


class SklearnLogitScaling(_ClassOneOrEach):
    """CalArena's Platt-logits (``features="affine"``) and Quadratic (``"quadratic"``):
    probmetrics' ``BinaryLogisticCalibrator``, i.e. scikit-learn's ``LogisticRegression``
    (``penalty=None, fit_intercept=False``, L-BFGS at its default tolerance) on the float32
    features of `calarena_binary_features`, fitted in float64. Where the L-BFGS stops
    depends on that precision: scikit-learn 1.9.1 keeps float32 features in float32 (on
    cv-binary's DenseNet-40 Platt's Kuiper 0.0019680 and ECE 0.0030981), cast to float64
    they give CalArena's printed 0.0019733314 and 0.0030926084 to 6e-10, and Quadratic's
    ECE 0.0028790695 (printed 0.0028790692; float32: 0.0028793481). Beyond two classes one
    fit per class, renormalised (`_ClassOneOrEach`).

    Parameters
    ----------
    features : {"affine", "quadratic"}
        ``(1, s)`` or ``(1, s, s^2)`` of class 1's log-odds ``s``.
    """

    _family = "scaling"  # its family in `calbench list methods`
    _parameter_constraints = {"features": Choice("affine", "quadratic")}

    def __init__(self, features="affine"):
        self.features = features

    def _fit_one(self, p, outcomes):
        from sklearn.linear_model import LogisticRegression

        x = calarena_binary_features(p, self.features).astype(np.float64)
        return LogisticRegression(penalty=None, fit_intercept=False, solver="lbfgs").fit(
            x, outcomes
        )

    def _apply_one(self, model, p):
        x = calarena_binary_features(p, self.features).astype(np.float64)
        return np.asarray(model.predict_proba(x), dtype=np.float64)


class PackageVennAbers(_ClassOneOrEach):
    """CalArena's binary Venn-Abers (probmetrics' ``BinaryVennAbersCalibrator``): the
    venn-abers package's inductive ``VennAbers`` fitted on class 1's stored float32
    probability (as ``[1 - p, p]`` in float32) and its merged probability ``p'`` predicted.
    Beyond two classes one predictor per class, renormalised (`_ClassOneOrEach`).

    Parameters
    ----------
    None
    """

    _family = "venn_abers"  # its family in `calbench list methods`

    @staticmethod
    def _expanded(p):
        return np.stack([np.float32(1.0) - p, p], axis=1)

    def _fit_one(self, p, outcomes):
        return optional_module("venn_abers").VennAbers().fit(self._expanded(p), outcomes)

    def _apply_one(self, model, p):
        p_prime, _ = model.predict_proba(self._expanded(p))
        return np.asarray(p_prime, dtype=np.float64)


class _Float32Outputs:
    """Predictions rounded to float32, column by column, as probmetrics returns them."""

    def _predict_proba(self, logits):
        return super()._predict_proba(logits).astype(np.float32).astype(np.float64)


class Float32DirichletKernel(_Float32Outputs, DirichletKernel):
    __doc__ = (
        """``kernel_nw`` with its predictions rounded to float32, as probmetrics'
    ``KernelCalibrator`` returns them (CalArena scores them in float32).

"""
        + "    Parameters\n"
        + DirichletKernel.__doc__.split("    Parameters\n", 1)[1]
    )


class Float32Boosted(_Float32Outputs, BoostedCalibrator):
    __doc__ = (
        """``xgboost`` with its predictions rounded to float32, as probmetrics'
    ``XGBoostCalibrator`` returns them (CalArena scores them in float32).

"""
        + "    Parameters\n"
        + BoostedCalibrator.__doc__.split("    Parameters\n", 1)[1]
    )
