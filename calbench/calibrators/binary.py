"""One-vs-rest binary calibration maps, renormalised (Valk 2.5.1; Kull 4.1).

Each class j gets its own map of ``p_j`` fitted to ``1[y = j]``; the k outputs are then
divided by their sum. A row whose maps all output 0 becomes uniform (as scikit-learn's
CalibratedClassifierCV does), so rows always lie on the simplex.
"""

from __future__ import annotations

import copy

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.simplex import softmax


class OneVsRestCalibrator(Calibrator):
    """Fits ``_fit_binary`` per class; ``_apply_binary`` maps scores of one class. On a
    two-class task one map, class 1's, and class 0 its complement: the binary calibration
    the binary methods were made for, as CalArena applies them (a map per class, then
    renormalised, moved its cv-binary numbers: Hist-quantile's Brier 0.022836 against its
    0.022773 on DenseNet-40's animals against machines)."""

    input_kind = "probabilities"

    def _scores(self, logits):
        """The probabilities the per-class maps read."""
        return softmax(logits)

    def _fit(self, logits, y):
        probs = self._scores(logits)
        self.maps_ = [
            self._fit_binary(probs[:, j], (y == j).astype(np.float64))
            for j in binary_columns(probs.shape[1])
        ]

    def _binary_outputs(self, probs):
        """Each class's map on its own column, before renormalising (two classes: class 1's
        map and its complement)."""
        columns = binary_columns(probs.shape[1])
        out = np.column_stack(
            [
                np.clip(self._apply_binary(m, probs[:, j]), 0.0, 1.0)
                for j, m in zip(columns, self.maps_, strict=True)
            ]
        )
        return np.column_stack([1.0 - out[:, 0], out[:, 0]]) if len(columns) == 1 else out

    @staticmethod
    def combine_per_class(models, logits, y, clip=1e-15):
        """Class j's map from the model whose binary map rates best on (column j of
        ``logits``'s probabilities, 1[y = j]) by binary log-loss, clipped to [clip, 1 - clip]
        as scikit-learn's ``log_loss`` of Kull et al.'s code: (combined model, the chosen
        model's index per class), the first of ties."""
        probs = softmax(np.asarray(logits, dtype=np.float64))
        k = probs.shape[1]
        outcomes = np.arange(k) == np.asarray(y)[:, None]
        losses = []
        for model in models:
            q = np.clip(model._binary_outputs(probs), clip, 1 - clip)
            losses.append(-np.where(outcomes, np.log(q), np.log1p(-q)).mean(axis=0))
        best = np.argmin(losses, axis=0)
        if k == 2:  # one map, class 1's: chosen on class 1's column
            best = best[1:]
        combined = copy.deepcopy(models[0])
        combined.maps_ = [models[b].maps_[j] for j, b in enumerate(best)]
        return combined, [int(b) for b in best]

    def _predict_proba(self, logits):
        return renormalised(self._binary_outputs(self._scores(logits)))


def binary_columns(k: int) -> list[int]:
    """The classes a binary method is fitted on: class 1 of two, else each against the rest
    (rows then `renormalised`), as CalArena applies its binary methods."""
    return [1] if k == 2 else list(range(k))


def class_probabilities(mapped: np.ndarray, k: int) -> np.ndarray:
    """Class probabilities from a binary method's maps on its `binary_columns`: class 1's
    and its complement for two classes, else each class's against the rest, `renormalised`."""
    if k == 2:
        return np.column_stack([1 - mapped[:, 0], mapped[:, 0]])
    return renormalised(mapped)


def renormalised(out: np.ndarray) -> np.ndarray:
    """One-vs-rest outputs (n, k) divided by their row sums; an all-zero row uniform."""
    sums = out.sum(axis=1, keepdims=True)
    uniform = np.full_like(out, 1.0 / out.shape[1])
    return np.where(sums > 0, out / np.where(sums > 0, sums, 1.0), uniform)
