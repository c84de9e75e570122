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
from calbench.calibrators.boosted.trees import BoostedCalibrator
from calbench.calibrators.constraints import Choice
from calbench.calibrators.float32 import calarena_probabilities
from calbench.calibrators.neighbourhood.dirichlet_kernel import DirichletKernel
from calbench.calibrators.optional import optional_module
from calbench.errors import CalbenchError


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


class SklearnLogitScaling(Calibrator):
    """CalArena's Platt-logits (``features="affine"``) and Quadratic (``"quadratic"``):
    probmetrics' ``BinaryLogisticCalibrator``, i.e. scikit-learn's ``LogisticRegression``
    (``penalty=None, fit_intercept=False``, L-BFGS at its default tolerance) on the float32
    features of `calarena_binary_features`, fitted in float64. Where the L-BFGS stops
    depends on that precision: scikit-learn 1.9.1 keeps float32 features in float32 (on
    cv-binary's DenseNet-40 Platt's Kuiper 0.0019680 and ECE 0.0030981), cast to float64
    they give CalArena's printed 0.0019733314 and 0.0030926084 to 6e-10, and Quadratic's
    ECE 0.0028790695 (printed 0.0028790692; float32: 0.0028793481). Two classes only.

    Parameters
    ----------
    features : {"affine", "quadratic"}
        ``(1, s)`` or ``(1, s, s^2)`` of class 1's log-odds ``s``.
    """

    _family = "scaling"  # its family in `calbench list methods`
    _parameter_constraints = {"features": Choice("affine", "quadratic")}

    input_kind = "probabilities"

    def __init__(self, features="affine"):
        self.features = features

    def _fit(self, logits, y):
        from sklearn.linear_model import LogisticRegression

        x = calarena_binary_features(_class_1(self, logits), self.features).astype(np.float64)
        self.model_ = LogisticRegression(penalty=None, fit_intercept=False, solver="lbfgs")
        self.model_.fit(x, np.asarray(y))
        self.coef_ = self.model_.coef_.ravel().astype(np.float64)

    def _predict_proba(self, logits):
        x = calarena_binary_features(_class_1(self, logits), self.features).astype(np.float64)
        return np.asarray(self.model_.predict_proba(x), dtype=np.float64)


def _class_1(calibrator, logits) -> np.ndarray:
    """Class 1's stored float32 probability; CalArena's binary methods take two classes."""
    if np.shape(logits)[1] != 2:
        raise CalbenchError(
            f"{type(calibrator).__name__} is CalArena's binary method: it needs two classes, "
            f"not {np.shape(logits)[1]}."
        )
    return calarena_probabilities(logits)[:, 1]


class PackageVennAbers(Calibrator):
    """CalArena's binary Venn-Abers (probmetrics' ``BinaryVennAbersCalibrator``): the
    venn-abers package's inductive ``VennAbers`` fitted on class 1's stored float32
    probability (as ``[1 - p, p]`` in float32) and its merged probability ``p'`` predicted.
    Two classes only.

    Parameters
    ----------
    None
    """

    _family = "venn_abers"  # its family in `calbench list methods`

    input_kind = "probabilities"

    @staticmethod
    def _expanded(p1):
        return np.stack([np.float32(1.0) - p1, p1], axis=1)

    def _fit(self, logits, y):
        self.model_ = optional_module("venn_abers").VennAbers()
        self.model_.fit(self._expanded(_class_1(self, logits)), np.asarray(y))

    def _predict_proba(self, logits):
        p_prime, _ = self.model_.predict_proba(self._expanded(_class_1(self, logits)))
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
