"""Synthetic tasks whose true class probabilities are known, and the population values of the
calibration errors that calbench's estimators estimate on them.

A task draws logits ``z = scale * g`` (``g`` standard normal, one per class); the true
probabilities are ``q = softmax(z)`` and the label is drawn from ``q``. The model predicts
``p = softmax(z / temperature)``: calibrated at temperature 1, over-confident below it,
under-confident above. ``p`` determines ``z`` up to a shift, so ``E[Y | p] = q`` exactly;
a calibrator's output ``f = c(p)`` has ``E[Y | f] = E[q | f]``.

**The population values.** Each estimator estimates a functional of the joint law of (f,
Y). The law of Y given the sample is known (``q``), so on a large sample of size M the
functional is computed with ``q`` in place of the drawn labels (Rao-Blackwellised: no label
noise), and the conditional gaps given a score, ``E[q_t - f_t | f_t]``, are the means of
``q_t - f_t`` over bins of about ``sqrt(M)`` nearby scores (equal mass; the gap, not
``q_t`` alone, so a calibrated model's is 0 however wide the bins):

- ``tce``: the top-label L1 error ``E |E[1{Y = T} | C] - C|`` with ``C = max_j f_j``,
  ``T = argmax_j f_j`` (binned confidence ECE, KDE-ECE);
- ``tce2``: its L2 form (the debiased ECE);
- ``cwce``: the classwise L1 error averaged over classes, ``E |E[Y_j | f_j] - f_j|`` (binned
  classwise ECE);
- ``ks`` and ``kuiper``: Gupta et al.'s ``sup_t |E[(C - 1{Y = T}) 1{C <= t}]|`` and its
  Kuiper form (highest minus lowest of the same curve);
- ``smooth``: Blasiok and Nakkiran's smooth ECE of the population.

`binary_tce` gives the top-label error in closed form for two classes and an uncalibrated
model (a one-dimensional integral), which the tests hold the sample values to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import integrate
from scipy.special import expit, log_softmax

from calbench.data.synthetic import sample_labels
from calbench.metrics.smooth import smooth_ece_at, smooth_ece_bandwidth
from calbench.simplex import softmax

#: The models: their temperature against the truth's.
MODELS = {"calibrated": 1.0, "over-confident": 0.5, "under-confident": 2.0}
#: Logit scale per number of classes: the true top probability averages about 0.8.
SCALES = {2: 2.0, 10: 3.0, 100: 3.6}
#: The population values computed for each estimand (module docstring).
ESTIMANDS = ("tce", "tce2", "cwce", "ks", "kuiper", "smooth")


@dataclass(frozen=True)
class TruthTask:
    """A task (module docstring): ``n_classes``, the model's ``temperature``, the logits'
    ``scale``."""

    n_classes: int
    model: str

    @property
    def temperature(self) -> float:
        return MODELS[self.model]

    @property
    def scale(self) -> float:
        return SCALES.get(self.n_classes, 3.0)

    @property
    def name(self) -> str:
        return f"{self.n_classes} classes, {self.model}"

    def draw(self, n: int, rng: np.random.Generator):
        """(the model's logits ``log p``, the true probabilities ``q``, labels drawn from
        ``q``) of ``n`` rows."""
        z = self.scale * rng.standard_normal((n, self.n_classes))
        q = softmax(z)
        y = sample_labels(q, rng)
        return log_softmax(z / self.temperature, axis=1), q, y


def _bin_means(scores: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each sample's ``E[value | score]``: the mean of ``values`` over its bin of about
    ``sqrt(M)`` samples with the nearest scores (equal mass)."""
    order = np.argsort(scores, kind="stable")
    size = max(int(np.sqrt(len(scores))), 1)
    bins = np.arange(len(scores)) // size
    sums = np.bincount(bins, values[order])
    counts = np.bincount(bins)
    out = np.empty(len(scores))
    out[order] = (sums / counts)[bins]
    return out


def population_errors(f: np.ndarray, q: np.ndarray) -> dict[str, float]:
    """The population values (`ESTIMANDS`) of a calibrator's outputs ``f`` (M x k) on a large
    sample whose true probabilities are ``q``."""
    rows = np.arange(len(f))
    top = f.argmax(axis=1)
    confidence, correct = f[rows, top], q[rows, top]
    gap = _bin_means(confidence, correct - confidence)
    classwise = [np.abs(_bin_means(f[:, j], q[:, j] - f[:, j])).mean() for j in range(f.shape[1])]
    order = np.argsort(confidence, kind="stable")
    curve = np.concatenate([[0.0], np.cumsum(confidence[order] - correct[order]) / len(f)])
    sigma = smooth_ece_bandwidth(confidence, correct)
    return {
        "tce": float(np.abs(gap).mean()),
        "tce2": float(np.sqrt((gap**2).mean())),
        "cwce": float(np.mean(classwise)),
        "ks": float(np.abs(curve).max()),
        "kuiper": float(curve.max() - curve.min()),
        "smooth": float(smooth_ece_at(confidence, correct, sigma)),
    }


def binary_tce(task: TruthTask) -> float:
    """The uncalibrated model's top-label L1 error on a two-class task, in closed form: with
    ``d = z_1 - z_0 ~ N(0, 2 scale^2)``, the confidence is ``sigmoid(|d| / T)`` and the
    chance it is right ``sigmoid(|d|)``, both functions of ``|d|`` alone, so
    ``TCE = E |sigmoid(|d| / T) - sigmoid(|d|)|``."""
    if task.n_classes != 2:
        raise ValueError("the closed form is for two classes")
    sd = np.sqrt(2.0) * task.scale

    def integrand(d):
        density = 2 * np.exp(-0.5 * (d / sd) ** 2) / (sd * np.sqrt(2 * np.pi))  # |d|
        return abs(expit(d / task.temperature) - expit(d)) * density

    return float(integrate.quad(integrand, 0, 12 * sd, limit=200)[0])
