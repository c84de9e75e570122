"""CalArena's float32 replicas (probkit/CalArena ``run_benchmark.py``, probmetrics 1.3):
its fits as its arithmetic makes them, for reproducing its printed numbers. The methods
themselves (calbench's ``isotonic_plain``, ``venn_abers_ovr``, ``vs``, ``dir_odir``, ``dir``
and ``sms``) are the library's; these differ only where CalArena's code does.

- `StoredIsotonic` and `StoredVennAbers`: isotonic regression and Venn-Abers on the stored
  float32 scores, whose ties pool as scikit-learn and the venn-abers package pool them.
- `Float32MatrixScaling` and `Float32StructuredMatrixScaling`: CalArena's MS and SMS,
  torchmin's float32 BFGS runs, which stop short of the optimum calbench's ``dir`` and ``sms``
  reach, run under pinned arithmetic (`calbench.papers.calarena2026.pinned_arithmetic`).
- `LogProbabilityVectorScaling` (VS on ``ln p``) and `SummedODIR` (dirichletcal's ODIR
  penalty, not averaged over the weights).
- `StoredBeta`: betacal's beta calibration on the stored float32 scores, which it clips at
  float32's epsilon and fits in float32.
- `ProbmetricsCDFSpline`: probmetrics' ``CDF-Spline`` in its float32 arithmetic (the
  library's ``cdf_spline`` with its hooks set so).
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import Choice
from calbench.calibrators.float32 import calarena_log_probabilities, calarena_probabilities
from calbench.calibrators.isotonic.regression import IsotonicCalibrator
from calbench.calibrators.matrix.dirichlet import DirichletCalibrator
from calbench.calibrators.optional import optional_module
from calbench.calibrators.scaling.beta import BetaCalibrator
from calbench.calibrators.scaling.temperature import VectorScaling
from calbench.calibrators.spline.cdf import CDFSpline
from calbench.calibrators.venn_abers.predictors import VennAbersCalibrator
from calbench.papers.calarena2026.pinned_arithmetic import ARITHMETICS, in_arithmetic, pinned
from calbench.simplex import softmax


class StoredIsotonic(IsotonicCalibrator):
    """Isotonic regression one-vs-rest as CalArena's Isotonic (scikit-learn's
    ``CalibratedClassifierCV(method="isotonic")``, prefit), fitted on the stored float32
    probabilities in float32. scikit-learn pools the scores of one block before PAVA where
    they lie within the dtype's resolution (``_make_unique``: 1e-6 for float32, 1e-15 for
    float64), so in float32 every probability below 1e-6 is one score: the map is flatter
    at the bottom than ``isotonic_plain``'s float64 fit (DenseNet-40 CIFAR-10: per-class
    maps up to 0.05 apart; held-out float32 log-loss 0.3273 against 0.3670).

    Parameters
    ----------
    tie_break : float
    pseudo_count : float
        As `IsotonicCalibrator` (CalArena: 0 and 0).
    """

    def _scores(self, logits):
        return calarena_probabilities(logits)

    def _fit_binary(self, scores, outcomes):
        return super()._fit_binary(scores.astype(np.float32), outcomes.astype(np.float32))

    def _apply_binary(self, fitted, scores):
        return super()._apply_binary(fitted, scores.astype(np.float32)).astype(np.float64)


class LogProbabilityVectorScaling(VectorScaling):
    __doc__ = (
        """Vector scaling ``softmax(w * ln p + b)`` on log-probabilities, as CalArena fits
    it (probmetrics' ``VectorScalingCalibrator`` on ``get_logits()`` of its probabilities).
    On logits (``vs``) it is another map: ``ln p = z - logsumexp(z)`` shifts each row by its
    own constant, which a per-class scale does not cancel.

"""
        + "    Parameters\n"
        + VectorScaling.__doc__.split("    Parameters\n", 1)[1]
    )

    input_kind = "probabilities"


class SummedODIR(DirichletCalibrator):
    __doc__ = (
        """Dirichlet calibration with dirichletcal's ODIR penalty as it stands
    (``reg_norm=False``): ``lambda * sum_{i != j} w_ij^2 + mu * sum_j b_j^2`` on the map
    with its last row fixed at zero, not divided by ``k (k - 1)`` and ``k`` as calbench's
    ``dir_odir``. CalArena's Dirichlet is this with lambda = mu = 1e-3.

"""
        + "    Parameters\n"
        + DirichletCalibrator.__doc__.split("    Parameters\n", 1)[1]
    )

    def _penalty_weights(self, k):
        weights = super()._penalty_weights(k)
        weights[:, :k] *= np.where(np.eye(k, dtype=bool), k, k * (k - 1))
        weights[:, k] *= k
        return weights


def fit_float32_matrix_scaling(logits, y):
    """CalArena's MS fit (probmetrics' ``MatrixScalingCalibrator``): ``(matrix, bias,
    converged)``, the identity where torchmin does not report success."""
    import torch

    minimize = optional_module("torchmin").minimize
    # Copies in torch's own memory, 64-byte aligned: MKL's reproducible mode promises the
    # same bits only on aligned inputs, and numpy's buffers land wherever the heap has room.
    x = torch.from_numpy(calarena_log_probabilities(logits, engine="torch")).clone()
    labels = torch.from_numpy(np.asarray(y, dtype=np.int64)).clone()
    k = x.shape[1]

    def loss(flat):
        matrix, bias = flat.split([k * k, k])
        return torch.nn.functional.cross_entropy(x @ matrix.view(k, k) + bias, labels)

    start = torch.cat([torch.eye(k, dtype=x.dtype).view(-1), torch.zeros(k, dtype=x.dtype)])
    method = "bfgs" if k * (k + 1) <= 1000 else "l-bfgs"
    result = minimize(loss, start, method=method)
    flat = result.x.detach() if result.success else start
    matrix, bias = (t.numpy().copy() for t in flat.split([k * k, k]))
    return matrix.reshape(k, k), bias, bool(result.success)


class Float32MatrixScaling(Calibrator):
    """Matrix scaling ``softmax(x A + b)`` of ``x = ln p`` as CalArena's MS fits it
    (probmetrics' ``MatrixScalingCalibrator``): float32 tensors, torchmin's BFGS (its
    L-BFGS above 1000 parameters) from the identity with torchmin's default stopping rule;
    a fit that does not report success keeps the identity. In float32 the run stops before
    the unpenalised optimum that calbench's ``dir`` reaches by Newton's method, which on
    DenseNet-40 CIFAR-10 acts as a mild regulariser (held-out float32 log-loss 0.2270
    against 0.2273). Where that run stops depends on the float32 arithmetic: the fit runs
    in `calbench.calibrators.pinned_arithmetic`'s (AVX2 kernels, one thread).

    Parameters
    ----------
    None
    """

    _family = "matrix"  # its family in `calbench list methods`

    input_kind = "probabilities"

    def _fit(self, logits, y):
        self.matrix_, self.bias_, self.converged_ = pinned(
            fit_float32_matrix_scaling, np.asarray(logits), np.asarray(y)
        )

    def _predict_proba(self, logits):
        # Float64 products: the same rows give the same numbers in any batch (float32 BLAS
        # rounds by block size); probmetrics' float32 ones agree to 1e-6.
        x = calarena_log_probabilities(logits, engine="torch").astype(np.float64)
        return softmax(x @ self.matrix_.astype(np.float64) + self.bias_.astype(np.float64))


class StoredVennAbers(VennAbersCalibrator):
    """One-vs-rest inductive Venn-Abers on the stored float32 probabilities themselves, as
    CalArena's Venn-Abers (the venn-abers package, ``one_vs_all``): scores that float32
    rounds to the same value (many confident ones to exactly 1.0) tie and pool, where
    ``venn_abers_ovr``'s log-probabilities keep them apart.

    Parameters
    ----------
    multiclass, n_folds, loss, random_state
        As `VennAbersCalibrator` (CalArena: one_vs_rest, 1).
    """

    def _problems(self, logits):
        if self.multiclass != "one_vs_rest":
            return super()._problems(logits)
        probs = calarena_probabilities(logits).astype(np.float64)
        return [(j, None, probs[:, j]) for j in range(probs.shape[1])]


def _sms_features(logits, inverse_temperature, n_calibration):
    """Float32 logs of the temperature-scaled probabilities mixed with the uniform at
    1 / (n + 1): what CalArena's SMS maps."""
    import torch

    x = torch.from_numpy(calarena_log_probabilities(logits, engine="torch"))
    probs = torch.softmax(inverse_temperature * x, dim=-1)
    mix = 1.0 / (n_calibration + 1)
    probs = (1.0 - mix) * probs + mix * (1.0 / probs.shape[-1]) * torch.ones_like(probs)
    return calarena_log_probabilities(np.log(probs.numpy().astype(np.float64)))


def fit_float32_structured_matrix_scaling(logits, y):
    """CalArena's SMS fit (probmetrics' ``SMSCalibrator``, ``bfgs`` solver):
    ``(inverse_temperature, weights)`` with ``weights = [I + M | b]``."""
    import torch

    minimize = optional_module("torchmin").minimize
    x = torch.from_numpy(calarena_log_probabilities(logits, engine="torch")).clone()
    labels = torch.from_numpy(np.asarray(y, dtype=np.int64)).clone()  # aligned, as MS's
    label_mean = torch.mean(x[torch.arange(len(labels)), labels])

    def slope(u):
        scaled = np.exp(u) * x
        return (
            torch.mean(torch.sum(x * torch.softmax(scaled, dim=-1), dim=-1)) - label_mean
        ).item()

    a, b = -16.0, 16.0
    for _ in range(30):
        c = a + 0.5 * (b - a)
        a, b = (a, c) if slope(c) > 0 else (c, b)
    inverse_temperature = float(np.exp(0.5 * (a + b)))
    n, k = x.shape
    features = torch.from_numpy(_sms_features(logits, inverse_temperature, n)).clone()
    lam_b = lam_d = k / n
    lam_o = k * (k - 1) / n

    def loss(params):
        delta, bias = params[: k * k].view(k, k), params[k * k :]
        out = features + torch.nn.functional.linear(features, delta, bias)
        diagonal = delta.diagonal()
        return (
            torch.nn.functional.cross_entropy(out, labels)
            + lam_b * bias.pow(2).sum()
            + lam_d * diagonal.pow(2).sum()
            + lam_o * (delta.pow(2).sum() - diagonal.pow(2).sum())
        )

    start = torch.zeros(k * (k + 1), dtype=features.dtype)
    result = minimize(loss, start, method="l-bfgs" if start.numel() > 1000 else "bfgs")
    flat = result.x.detach()
    weights = torch.hstack(
        [torch.eye(k, dtype=flat.dtype) + flat[: k * k].view(k, k), flat[k * k :, None]]
    )
    return inverse_temperature, weights.numpy()


class Float32StructuredMatrixScaling(Calibrator):
    """Structured matrix scaling as CalArena's SMS (probmetrics' ``SMSCalibrator``, its
    ``bfgs`` solver), in its float32 arithmetic: the inverse temperature by 30 bisection
    steps of the log-loss's derivative on ``ln u`` in [-16, 16], the scaled probabilities
    mixed with the uniform at 1 / (n + 1), then ``softmax(x + x M^T + b)`` on their float32
    logs with the ridge penalties of `calbench.calibrators.matrix.structured` (paper defaults),
    fitted by torchmin's BFGS (L-BFGS beyond 1000 parameters) from ``M = 0, b = 0``, in
    `calbench.calibrators.pinned_arithmetic`'s float32 arithmetic. calbench's ``sms``
    minimises the same objective in float64 to a tighter tolerance.

    Parameters
    ----------
    arithmetic : str
        The float32 arithmetic the fit runs in (`pinned_arithmetic.ARITHMETICS`): the pinned
        ``avx2_cnr_1t`` (``sms_calarena``), or another for the spread over arithmetics
        (``sms_calarena_arithmetic``, the procedure twin calarena_cv_procedure).
    """

    _family = "matrix"  # its family in `calbench list methods`
    _parameter_constraints = {"arithmetic": Choice(*ARITHMETICS)}

    input_kind = "probabilities"

    def __init__(self, arithmetic="avx2_cnr_1t"):
        self.arithmetic = arithmetic

    def _fit(self, logits, y):
        self.inverse_temperature_, self.weights_ = in_arithmetic(
            self.arithmetic,
            fit_float32_structured_matrix_scaling,
            np.asarray(logits),
            np.asarray(y),
        )

    def _predict_proba(self, logits):
        x = _sms_features(logits, self.inverse_temperature_, self.n_calibration_)
        x = x.astype(np.float64)  # float64 products, as MS's
        return softmax(np.hstack([x, np.ones((len(x), 1))]) @ self.weights_.T.astype(np.float64))


class StoredBeta(BetaCalibrator):
    """CalArena's Beta (probmetrics' ``BetacalCalibrator``: betacal's ``BetaCalibration("abm")``)
    on class 1's stored float32 probability. betacal clips scores at their dtype's epsilon,
    1.2e-7 for float32 where calbench's `beta` clips at float64's 2.2e-16, and scikit-learn
    fits the float32 features in float32 at its default tolerance: on cv-binary's
    DenseNet-40, where 49.6% of the calibration scores are exactly 1.0 in float32, the two
    fits' predictions lie up to 0.027 apart (Brier 0.0171098, CalArena's printed one,
    against 0.0169483).

    Parameters
    ----------
    None
    """

    def _scores(self, logits):
        return calarena_probabilities(logits)

    def _fit_binary(self, scores, outcomes):
        if outcomes.min() == outcomes.max():  # a class absent: `beta`'s constant frequency
            return super()._fit_binary(scores, outcomes)
        betacal = optional_module("betacal")
        return betacal.BetaCalibration("abm").fit(
            np.asarray(scores, dtype=np.float32), outcomes.astype(int)
        )

    def _apply_binary(self, fitted, scores):
        if isinstance(fitted, tuple):
            return super()._apply_binary(fitted, scores)
        return np.asarray(fitted.predict(np.asarray(scores, dtype=np.float32)), np.float64)


class ProbmetricsCDFSpline(CDFSpline):
    """CalArena's ``CDF-Spline`` as probmetrics' code computes it (``cdf_spline_calarena``):
    the float32 probabilities (`calarena_probabilities`) summed in float32, tied scores in
    the order numpy's default sort gives them, and beyond two classes a floor of 1e-30 in
    place of the clipping before the renormalisation. On tie-free scores it agrees with the
    library's ``cdf_spline`` to 1e-5; where many scores tie (float32 probabilities at their
    floor) the order of the ties moves the spline, by up to 1e-3 on the tests' 4-class task.

    Parameters
    ----------
    n_knots : int
        Equally spaced knots of the natural cubic spline (probmetrics' ``splines=6``).
    """

    _fit_options = {"argsort": np.argsort, "float32_sums": True}

    def _probabilities(self, logits):
        return calarena_probabilities(logits)

    def _bounded_outputs(self, mapped, k):
        if k > 2:  # probmetrics' one-vs-rest floors each class at 1e-30, then renormalises.
            return np.clip(mapped, 1e-30, None)
        return super()._bounded_outputs(mapped, k)
