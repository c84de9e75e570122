r"""Logistic maps of one class's score: Platt scaling on the logit or on the probability, and
quadratic scaling (CalArena's binary track: ``Platt-logits``, ``Platt-probs``, ``Quadratic``).

For two classes the score is class 1's: its logit :math:`s = \ln p_1 - \ln p_0` (the logit
difference :math:`z_1 - z_0`) or its probability :math:`p_1`, and

.. math::

    \hat p_1 = \sigma(\theta^\top \phi(s)), \qquad
    \phi(s) = (1, s) \text{ (affine)}, \ (1, s, s^2) \text{ (quadratic)},

fitted by maximum likelihood (Newton's method: two or three parameters), as probmetrics'
``BinaryLogisticCalibrator`` fits it with scikit-learn's unpenalised ``LogisticRegression``.
Platt on the probability (scikit-learn's ``CalibratedClassifierCV(method="sigmoid")`` on a
prefit model's probabilities, CalArena's ``Platt-probs``) uses :math:`\phi(p_1) = (1, p_1)` and
Platt's (1999) targets :math:`(N_+ + 1) / (N_+ + 2)` and :math:`1 / (N_- + 2)` in place of 1
and 0. With more classes each class's map is fitted one-vs-rest on its own logit
:math:`\ln p_c - \ln(1 - p_c)` (or probability) and the rows renormalised, as CalArena applies
its binary methods to multiclass tasks.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

from calbench.calibrators.base import Calibrator
from calbench.calibrators.binary import binary_columns, class_probabilities
from calbench.calibrators.constraints import Choice
from calbench.simplex import log_softmax

FEATURES = ("affine", "quadratic", "affine_probability")


def fit_logistic(features, targets, max_iter=100, tol=1e-12):
    """(theta, iterations, converged): the maximum-likelihood logistic weights of
    ``features`` (n, d) for ``targets`` in [0, 1], by Newton's method with a backtracking
    line search, from 0."""
    n, d = features.shape
    theta = np.zeros(d)

    def loss(t):
        eta = features @ t
        return -(targets * log_expit(eta) + (1 - targets) * log_expit(-eta)).mean()

    value = loss(theta)
    for iteration in range(1, max_iter + 1):
        p = expit(features @ theta)
        grad = features.T @ (p - targets) / n
        hessian = (features * (p * (1 - p))[:, None]).T @ features / n
        try:
            step = np.linalg.solve(hessian + 1e-12 * np.eye(d), grad)
        except np.linalg.LinAlgError:
            step = grad
        size = 1.0
        while size > 1e-10:
            candidate = theta - size * step
            new = loss(candidate)
            if new <= value:
                break
            size /= 2
        else:
            return theta, iteration, True  # no decrease at float64 precision: the minimum
        theta, decrease, value = candidate, value - new, new
        if np.abs(grad).max() < tol or decrease <= tol * 1e-3 * max(abs(value), 1.0):
            return theta, iteration, True
    return theta, max_iter, False


class LogitScaling(Calibrator):
    """Platt or quadratic scaling of each class's score (module docstring): ``features``
    ``"affine"`` (Platt on the logit), ``"quadratic"`` or ``"affine_probability"`` (Platt on
    the probability, with Platt's targets); ``coef_`` holds each map's weights.

    Parameters
    ----------
    features : {"affine", "quadratic", "affine_probability"}
        The map's features of the score.
    max_iter : int
        The most Newton steps of each map.

    Examples
    --------
    >>> from calbench.calibrators import make_calibrator
    >>> import numpy as np
    >>> z = np.array([[0.0, 2.0], [0.0, -1.0], [0.0, 3.0], [0.0, 0.5]])
    >>> make_calibrator("platt_logits").fit(z, [1, 0, 0, 1]).predict_proba(z).shape
    (4, 2)
    """

    _parameter_constraints = {"features": Choice(*FEATURES)}
    # A quadratic's tails can reach exactly 0 or 1 in float64.
    _certainty = "possible"

    def __init__(self, features="affine", max_iter=100):
        self.features = features
        self.max_iter = max_iter

    def _scores(self, logits) -> np.ndarray:
        """(n, maps): each map's score, from one log-softmax of ``logits``: class 1's logit
        ``ln p_1 - ln p_0`` for two classes, each class's ``ln p_c - ln(1 - p_c)`` beyond,
        or the probabilities themselves for Platt on the probability."""
        logp = log_softmax(logits)
        if self.features == "affine_probability":
            return np.exp(logp[:, binary_columns(logits.shape[1])])
        if logits.shape[1] == 2:
            return (logp[:, 1] - logp[:, 0])[:, None]
        return logp - np.log(-np.expm1(np.minimum(logp, -1e-300)))  # ln(1 - p_c)

    def _design(self, s):
        ones = np.ones_like(s)
        if self.features == "quadratic":
            return np.column_stack([ones, s, s * s])
        return np.column_stack([ones, s])

    def _fit(self, logits, y):
        scores = self._scores(logits)
        self.coef_ = []
        for c, s in zip(binary_columns(logits.shape[1]), scores.T, strict=True):
            outcome = (np.asarray(y) == c).astype(np.float64)
            targets = outcome
            if self.features == "affine_probability":
                positives = outcome.sum()
                negatives = len(outcome) - positives
                targets = np.where(
                    outcome == 1, (positives + 1) / (positives + 2), 1 / (negatives + 2)
                )
            theta, _, converged = fit_logistic(self._design(s), targets, self.max_iter)
            if not converged:
                self.unconverged(
                    f"LogitScaling({self.features}): Newton's method did not converge in "
                    f"{self.max_iter} steps for class {c} (separable scores?).",
                    stacklevel=4,
                )
            self.coef_.append(theta)
        self.coef_ = np.array(self.coef_)

    def _outputs(self, logits) -> np.ndarray:
        """(n, maps): each map's calibrated probability of its class."""
        scores = self._scores(logits)
        return np.column_stack(
            [expit(self._design(s) @ t) for s, t in zip(scores.T, self.coef_, strict=True)]
        )

    def _predict_proba(self, logits):
        return class_probabilities(self._outputs(logits), logits.shape[1])


def equal_mass_bins(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Kumar et al.'s bin edges: the sorted scores split into ``n_bins`` parts of near equal
    count, each edge half-way between one part's last score and the next part's first,
    the last edge 1 (duplicates dropped)."""
    parts = np.array_split(np.sort(scores), min(n_bins, len(scores)))
    edges = [(a[-1] + b[0]) / 2.0 for a, b in zip(parts[:-1], parts[1:], strict=True)]
    return np.unique(np.array([*edges, 1.0]))


class ScalingBinning(LogitScaling):
    """Kumar, Liang and Ma's (2019) scaling-binning calibrator (their ``PlattBinnerCalibrator``,
    CalArena's ``Scaling-Binning``): Platt scaling of the class logit, then its outputs on
    the calibration data cut into ``n_bins`` bins of equal count, each predicting the mean
    Platt output of its calibration points (an empty bin its mid-point). The binned map
    takes few values, so its calibration error can be estimated without binning bias.

    Parameters
    ----------
    n_bins : int
        The number of bins (theirs: 10).
    max_iter : int
        The most Newton steps of each Platt fit.
    clip : float
        Their Platt step's logit is that of the probability clipped into [clip, 1 - clip]
        (theirs: 1e-12, so no logit passes ±27.6). On a network whose probabilities round
        to 1 (CalArena's cv-binary DenseNet-40, float32: half the calibration scores) the
        unclipped logit difference reaches 708 and moves the Platt fit and a bin: Kuiper
        0.001873 against the printed 0.002529 (0 before 2026-11-28: no clip).
    """

    _certainty = "never"
    #: Platt on the logit, the scaling step (not a parameter).
    features = "affine"

    def __init__(self, n_bins=10, max_iter=100, clip=1e-12):
        self.n_bins = n_bins
        self.max_iter = max_iter
        self.clip = clip

    def _scores(self, logits) -> np.ndarray:
        """Each map's logit as Kumar et al. take it: ``ln(p / (1 - p))`` of the class's
        probability clipped into [clip, 1 - clip] (`clip` 0: calbench's logit of
        `LogitScaling`)."""
        if not self.clip:
            return super()._scores(logits)
        probs = np.exp(log_softmax(logits)[:, binary_columns(logits.shape[1])])
        probs = np.clip(probs, self.clip, 1 - self.clip)
        return np.log(probs / (1 - probs))

    def _fit(self, logits, y):
        super()._fit(logits, y)
        self.bins_, self.bin_values_ = [], []
        for scaled in LogitScaling._outputs(self, logits).T:
            edges = equal_mass_bins(scaled, self.n_bins)
            index = np.searchsorted(edges, scaled)
            sums = np.bincount(index, weights=scaled, minlength=len(edges))
            counts = np.bincount(index, minlength=len(edges))
            middles = (edges + np.concatenate([[0.0], edges[:-1]])) / 2
            self.bins_.append(edges)
            self.bin_values_.append(np.where(counts > 0, sums / np.maximum(counts, 1), middles))

    def _outputs(self, logits):
        """Each map's Platt output, replaced by its bin's value."""
        scaled = LogitScaling._outputs(self, logits)
        return np.column_stack(
            [
                values[np.searchsorted(edges, column)]
                for column, edges, values in zip(
                    scaled.T, self.bins_, self.bin_values_, strict=True
                )
            ]
        )


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "platt_logits": (LogitScaling, {"features": "affine"}),
    "platt_probs": (LogitScaling, {"features": "affine_probability"}),
    "quadratic": (LogitScaling, {"features": "quadratic"}),
    "scaling_binning": (ScalingBinning, {}),
}
