"""Valk's k-nearest-neighbour calibration as his code runs it: the procedure behind his
``knn_kl`` and ``ts_knn_euc`` rows (msc-knn-cal ``helpers/weighting_calibrators.py``,
``calibrate_preds_with_weighting_cv`` with ``k_closest_uniform`` over ``kl`` or
``minkowski_dist``; settings from ``train_and_save_calibrators.py``).

What differs from calbench's ``knn_kl`` / ``knn_euc`` (`calbench.calibrators.neighbourhood.kernel`),
which follow his thesis in float64:

- **float32 distances.** On his float32 probabilities (`reference_valk`), elementwise as his
  code writes them: ``sum_j p_j ln(p_j / p_ij)`` and ``sqrt(sum_j (p_j - p_ij)^2)``. A
  calibration probability that underflowed to 0 puts that point at infinite KL distance; a
  test probability of 0 makes ``0 ln 0`` and the whole row of distances NaN.
- **Neighbours.** ``np.argpartition(d, k)[:, :k]`` as his numpy 1.19 took them
  (`calbench.numpy1_order`): NaN last, and where a row is NaN or ties at the k-th place, the
  indices its introselect's swaps leave (numpy 2's SIMD selection takes others).
- **k, chosen inside the fit.** 32 to 4096 by the mean over ``KFold(10, shuffle=True,
  random_state=0)`` of scikit-learn's log-loss as it was then (clip 1e-15) on the held-out
  fold; a k the fold cannot hold fails in his code and scores 99999, as his ``except`` does.
- **Output.** ``p - mean of (p_i - y_i)`` over the neighbours, in float64, then his
  ``force_p_to_simplex``.
- **With TS** (``temperature=True``, his ``knnTS``): his temperature, then the neighbours
  on his float32 scaled probabilities.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import COUNT, Choice
from calbench.calibrators.neighbourhood.kernel import default_epsilon
from calbench.numpy1_order import k_smallest
from calbench.papers.valk2022.reference_valk import (
    force_p_to_simplex,
    sklearn_2022_log_loss,
    valk_probabilities,
    valk_temperature,
)

#: Valk's k grid (train_and_save_calibrators.py ``k_s_to_try``).
KS = (32, 64, 128, 256, 512, 1024, 2048, 4096)
#: His test rows per distance block (``batch_size``); the distances do not depend on it.
BATCH = 300
#: What his cross-validation scores a k it cannot fit.
FAILED = 99999.0


def valk_distances(test: np.ndarray, train: np.ndarray, metric: str) -> np.ndarray:
    """His ``kl(test, train)`` or ``minkowski_dist(test, train, p=2)``, float32 in, float32
    out, (test rows, train rows)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if metric == "kl":
            return np.sum(test[:, None] * np.log(test[:, None] / train), axis=2)
        return (np.abs(test[:, None] - train) ** 2).sum(axis=2) ** (1 / 2)


def neighbour_means(distances: np.ndarray, errors: np.ndarray, k: int) -> np.ndarray:
    """His ``k_closest_uniform`` weights times ``p_i - y_i``: the mean error of each row's
    k nearest (numpy 1's ``argpartition(d, k)``: it needs k < the number of columns)."""
    nearest = k_smallest(distances, k)
    weights = np.zeros(distances.shape)
    np.put_along_axis(weights, nearest, 1 / k, axis=1)
    return np.dot(weights, errors)


class ValkNeighbours(Calibrator):
    """Valk's KNN calibration, his code's procedure (module docstring).

    Parameters
    ----------
    metric : {"kl", "euclidean"}
    ks : tuple of int
        The k his 10-fold CV chooses from.
    n_cv_folds : int
    temperature : bool
        Temperature-scale first as his code does (`valk_temperature`; his ``knnTS``).
    """

    _parameter_constraints = {"metric": Choice("kl", "euclidean"), "n_cv_folds": COUNT}

    def __init__(self, metric="kl", ks=KS, n_cv_folds=10, temperature=False):
        self.metric = metric
        self.ks = ks
        self.n_cv_folds = n_cv_folds
        self.temperature = temperature

    def _fit(self, logits, y):
        from sklearn.model_selection import KFold

        self.temperature_ = valk_temperature(logits, y) if self.temperature else None
        probs = valk_probabilities(logits, self.temperature_)
        self.crop_ = default_epsilon(probs.shape[1])
        errors = probs - np.eye(probs.shape[1])[y]
        scores = {k: [] for k in self.ks}
        folds = KFold(int(self.n_cv_folds), shuffle=True, random_state=0).split(probs)
        for fit, held in folds:
            # His code recomputes the distances for every k; they are the same numbers.
            distances = self._distances(probs[held], probs[fit])
            for k in self.ks:
                if k >= len(fit):
                    scores[k].append(FAILED)
                    continue
                corrected = probs[held] - neighbour_means(distances, errors[fit], int(k))
                predictions = force_p_to_simplex(corrected, self.crop_)
                scores[k].append(sklearn_2022_log_loss(predictions, y[held]))
        self.k_scores_ = [float(np.mean(scores[k])) for k in self.ks]
        self.n_neighbors_ = int(list(self.ks)[int(np.argmin(self.k_scores_))])
        self.probs_, self.errors_ = probs, errors

    def _distances(self, test, train):
        return np.concatenate(
            [
                valk_distances(test[start : start + BATCH], train, self.metric)
                for start in range(0, len(test), BATCH)
            ]
        )

    def _predict_proba(self, logits):
        probs = valk_probabilities(logits, self.temperature_)
        out = np.empty(probs.shape)
        for start in range(0, len(probs), BATCH):
            block = probs[start : start + BATCH]
            distances = valk_distances(block, self.probs_, self.metric)
            out[start : start + BATCH] = block - neighbour_means(
                distances, self.errors_, self.n_neighbors_
            )
        return force_p_to_simplex(out, self.crop_)
