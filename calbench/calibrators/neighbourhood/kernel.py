r"""Non-parametric calibrators that average calibration errors over a neighbourhood (Valk 3).

Each assumes that nearby predictions share their calibration error (Valk 3.1) and
estimates it as a weighted mean of ``p_i - y_i`` over the calibration set:

.. math::

    \hat c(p) = \mathrm{crop}\Big(p - \sum_i w_i(p)\,(p_i - y_i)\Big), \qquad \sum_i w_i(p) = 1

``crop`` is Valk's code's ``force_p_to_simplex`` (``cropping="outside"``, the default): entries
below 0 become :math:`\epsilon`, above 1 become :math:`1 - \epsilon`, then the row is
renormalised; entries inside [0, 1] stay as they are. The thesis' Algorithm 2 as printed
clips every entry into :math:`[\epsilon, 1 - \epsilon]` (``cropping="clip"``), which also
moves the many small probabilities below :math:`\epsilon` and changes log-losses.

- ``knn_kl`` / ``knn_euc`` (Valk 3.3): uniform weights on the k nearest calibration points by
  :math:`d_{KL}(p, p_i)` or Euclidean distance.
- ``kernel_rbf`` (Valk 3.4): :math:`w_i \propto \exp(-\gamma \|p - p_i\|^2)`.
- ``kernel_dir`` (Valk 3.4): a Dirichlet density. Valk's code (``dirichlet_log_kernel``)
  centres it on the calibration point, :math:`\alpha_{ij} = p_{ij}/h + 1`, at the test
  point: :math:`\ln w_i = \frac1h \sum_j p_{ij} \ln p_j - \sum_j \ln\Gamma(p_{ij}/h + 1)
  + \mathrm{const}` (``dirichlet_alpha="calibration"``, the default).
  The thesis' formula puts :math:`\alpha_j = p_j/h + 1` at the test point and evaluates it at
  :math:`p_i`, whose normaliser depends on p alone: :math:`w_i \propto \exp(\frac1h \sum_j
  p_j \ln p_{ij})` (``dirichlet_alpha="test"``).

Both the KL divergence (up to a term constant in i) and the Dirichlet kernels are matrix
products of :math:`P` and :math:`\ln P` across the two sets; the Euclidean ones use
:math:`\|p\|^2 - 2 p \cdot p_i + \|p_i\|^2`. Test points are processed in chunks, so memory
stays near ``chunk x n_cal`` floats. ``ln p_i`` comes from the log-softmax of the logits, so
exact zeros (data given as probabilities) enter as ``ln(2.2e-308)``: finite, and far.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.special import gammaln

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import Choice
from calbench.calibrators.solvers.threads import blas_threads, cores
from calbench.simplex import log_softmax

# Distance matrix entries per chunk (~64 MB of float64).
_CHUNK_ENTRIES = 8_000_000


def crop(probs: np.ndarray, epsilon: float, cropping: str = "outside") -> np.ndarray:
    """Bring corrected predictions back onto the simplex, then renormalise.

    ``outside`` (Valk's code): only entries below 0 or above 1 move, to epsilon and
    1 - epsilon. ``clip`` (Valk's Algorithm 2 as printed): every entry into [epsilon, 1 - epsilon].
    """
    if cropping == "clip":
        out = np.clip(probs, epsilon, 1.0 - epsilon)
    else:
        out = np.where(probs < 0, epsilon, np.where(probs > 1, 1.0 - epsilon, probs))
    return out / out.sum(axis=1, keepdims=True)


def default_epsilon(n_classes: int) -> float:
    """Valk 3.5: 1e-4 for up to 10 classes, 1e-6 beyond (100 classes in the thesis)."""
    return 1e-4 if n_classes <= 10 else 1e-6


class NeighbourhoodCalibrator(Calibrator):
    """Shared fitting and chunked prediction; subclasses define the weight matrix."""

    input_kind = "probabilities"

    def _fit(self, logits, y):
        self.log_probs_ = log_softmax(logits)
        self.probs_ = np.exp(self.log_probs_)
        one_hot = np.zeros_like(self.probs_)
        one_hot[np.arange(len(y)), y] = 1.0
        self.errors_ = self.probs_ - one_hot
        self.sq_norms_ = (self.probs_**2).sum(axis=1)
        self.epsilon_ = (
            default_epsilon(logits.shape[1]) if self.epsilon is None else float(self.epsilon)
        )

    def _weights(self, block: np.ndarray, log_block: np.ndarray) -> np.ndarray:
        """Weights (chunk x n_cal, rows summing to 1) of test probabilities ``block``."""
        raise NotImplementedError

    def _squared_distances(self, block: np.ndarray) -> np.ndarray:
        """||p - p_i||^2 up to ||p||^2, which is constant along a row and cancels in the
        ranking of neighbours and in the normalised kernel weights."""
        return self.sq_norms_[None, :] - 2.0 * (block @ self.probs_.T)

    def _predict_proba(self, logits):
        log_probs = log_softmax(logits)
        probs = np.exp(log_probs)
        chunk = max(1, _CHUNK_ENTRIES // len(self.probs_))
        out = np.empty_like(probs)

        def predict(start):
            part = slice(start, start + chunk)
            out[part] = probs[part] - self._weights(probs[part], log_probs[part]) @ self.errors_

        starts = range(0, len(probs), chunk)
        workers = min(len(starts), cores())
        if workers <= 1:
            for start in starts:
                predict(start)
        else:
            # The chunk's exp / argpartition run one core each (numpy releases the GIL in
            # them); chunks in parallel, each with one BLAS thread, are 1.7x faster on 2
            # cores at 100000 x 5000. Every chunk writes its own rows: the same numbers.
            with blas_threads(1), ThreadPoolExecutor(workers) as pool:
                list(pool.map(predict, starts))
        return crop(out, self.epsilon_, self.cropping)


class KNNCalibrator(NeighbourhoodCalibrator):
    """KNN calibration (Valk 3.3).

    Parameters
    ----------
    n_neighbors : int
        k; clipped to the number of calibration samples (``n_neighbors_`` is the k used).
    metric : {"kl", "euclidean"}
        ``kl`` ranks calibration points by :math:`d_{KL}(p, p_i)`.
    epsilon : float or None
        Cropping constant; None takes `default_epsilon`.
    cropping : {"outside", "clip"}
        See `crop`.
    """

    _parameter_constraints = {"metric": Choice("kl", "euclidean")}

    def __init__(self, n_neighbors=512, metric="kl", epsilon=None, cropping="outside"):
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.epsilon = epsilon
        self.cropping = cropping

    def _fit(self, logits, y):
        super()._fit(logits, y)
        # Valk's grid reaches 4096 neighbours; on a smaller calibration set (or inner fold)
        # k is clipped to its size, i.e. every point is a neighbour: a documented clip
        # rather than an error that would stop a whole sweep. n_neighbors_ is the k used.
        self.n_neighbors_ = min(int(self.n_neighbors), len(y))

    def _distances(self, block):
        if self.metric == "kl":
            # d_KL(p, p_i) = sum_j p_j ln p_j - sum_j p_j ln p_ij; the first term is constant in i.
            return -(block @ self.log_probs_.T)
        return self._squared_distances(block)

    def _weights(self, block, log_block):
        k = self.n_neighbors_
        dist = self._distances(block)
        weights = np.zeros_like(dist)
        if k == dist.shape[1]:
            weights[:] = 1.0 / k
            return weights
        nearest = np.argpartition(dist, k - 1, axis=1)[:, :k]
        np.put_along_axis(weights, nearest, 1.0 / k, axis=1)
        return weights


class KernelCalibrator(NeighbourhoodCalibrator):
    """Kernel calibration (Valk 3.4).

    Parameters
    ----------
    kernel : {"rbf", "dirichlet"}
    bandwidth : float
        ``gamma`` of the RBF kernel, or ``h`` of the Dirichlet kernel; > 0.
    epsilon : float or None
        Cropping constant; None takes `default_epsilon`.
    cropping : {"outside", "clip"}
        See `crop`.
    dirichlet_alpha : {"calibration", "test"}
        Which point the Dirichlet kernel's parameters come from (module docstring):
        ``calibration`` as Valk's code, ``test`` as the thesis' formula.
    """

    _parameter_constraints = {
        "kernel": Choice("rbf", "dirichlet"),
        "dirichlet_alpha": Choice("calibration", "test"),
    }

    def __init__(
        self,
        kernel="dirichlet",
        bandwidth=0.1,
        epsilon=None,
        cropping="outside",
        dirichlet_alpha="calibration",
    ):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.epsilon = epsilon
        self.cropping = cropping
        self.dirichlet_alpha = dirichlet_alpha

    def _fit(self, logits, y):
        super()._fit(logits, y)
        if self.kernel == "dirichlet" and self.dirichlet_alpha == "calibration":
            # ln of the Dirichlet normaliser centred on each calibration point, up to the
            # Gamma(1/h + k) all of them share.
            self.log_gamma_sums_ = gammaln(self.probs_ / float(self.bandwidth) + 1.0).sum(1)

    def _weights(self, block, log_block):
        h = float(self.bandwidth)
        if self.kernel == "dirichlet" and self.dirichlet_alpha == "calibration":
            log_w = (log_block @ self.probs_.T) / h - self.log_gamma_sums_[None, :]
        elif self.kernel == "dirichlet":
            log_w = (block @ self.log_probs_.T) / h
        else:
            log_w = -float(self.bandwidth) * self._squared_distances(block)
        # Normalised weights are a softmax over calibration points: stable for any bandwidth.
        log_w -= log_w.max(axis=1, keepdims=True)
        np.exp(log_w, out=log_w)
        log_w /= log_w.sum(axis=1, keepdims=True)
        return log_w


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "knn_kl": (KNNCalibrator, {"metric": "kl"}),
    "knn_euc": (KNNCalibrator, {"metric": "euclidean"}),
    "kernel_rbf": (KernelCalibrator, {"kernel": "rbf"}),
    "kernel_dir": (KernelCalibrator, {"kernel": "dirichlet"}),
}
