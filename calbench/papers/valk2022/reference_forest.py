"""Valk's random calibration forest as his code runs it: the procedure behind his forest
rows (msc-knn-cal ``helpers/calibration_trees.py``, ``calibrate_preds_with_random_forest_cv``
with ``RandomSplitCalibrationForest``; settings from ``train_and_save_calibrators.py``).

What differs from calbench's ``forest`` (`calbench.calibrators.neighbourhood.forest`), which
follows his thesis' description:

- **Draws.** numpy's legacy global generator, seeded with ``seed`` at every forest fit
  (his ``np.random.seed(0)``). The trees are grown depth-first, a node's left subtree
  before its right, and every node that may split draws its class
  (``choice(arange(k))``) and then its threshold (``uniform(min, max)`` of that class over
  the node's points). A node at full depth or holding one point is a leaf and draws
  nothing; a split that sends every point one way makes a leaf after its draws. calbench's
  forest grows level by level from its own generator, so its trees differ.
- **Depth, chosen inside the fit.** Depths 1 to 12 (not bins), each rated by the mean over
  ``KFold(10, shuffle=True, random_state=1)`` of scikit-learn's log-loss (as it clipped
  then: ``[1e-15, 1 - 1e-15]``, rows renormalised) on the held-out fold.
- **float32.** The probabilities are his float32 softmax (`reference_valk`). A point goes
  right where ``p_j >= threshold`` with the threshold rounded to float32, as numpy 1.x
  compared a float32 column with a float64 scalar. A leaf's mean probability is numpy's
  float32 mean of its points.
- **Output.** Each tree moves a point by its leaf's ``mean_y - mean_p``; the trees' outputs
  are averaged, then his ``force_p_to_simplex``.
- **With TS** (``temperature=True``, his ``rfTS``): his own temperature (`valk_temperature`),
  then the forest on ``softmax(logits / T)`` computed in float32, as his code hands it over.
- **At another stop of his TS** (``ts_stop``): a temperature that his BFGS's stopping test
  accepts as well (`accepted_temperature`: ``ts_stop`` of the way from the centre of that
  interval to an end). The test does not fix where his run stops; its path does, which
  this procedure cannot replay on his machine, so the twin spans the interval.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import COUNT, NoneOr, Number
from calbench.calibrators.neighbourhood.kernel import default_epsilon
from calbench.papers.valk2022.reference_valk import (
    accepted_temperature,
    force_p_to_simplex,
    sklearn_2022_log_loss,
    valk_probabilities,
    valk_temperature,
)

#: Valk's depth grid (train_and_save_calibrators.py ``depths_to_try``).
DEPTHS = tuple(range(1, 13))


class _Tree:
    """One grown tree: per node its class, float32 threshold and children (-1 at a leaf),
    and per leaf the correction ``mean_y - mean_p`` (zero elsewhere)."""

    def __init__(self, probs, labels, depth, rs):
        n_classes = probs.shape[1]
        split_class, threshold, left, right, shifts = [], [], [], [], {}
        stack = [(np.arange(len(probs)), depth, -1, left)]  # rows, depth to go, parent, side
        while stack:
            rows, to_go, parent, side = stack.pop()
            node = len(left)
            split_class.append(0)
            threshold.append(np.float32(0))
            left.append(-1)
            right.append(-1)
            if parent >= 0:
                side[parent] = node
            if to_go > 0 and len(rows) > 1:
                j = rs.randint(0, n_classes)  # what choice(arange(k)) draws, 4x faster
                column = probs[rows, j]
                cut = np.float32(rs.uniform(low=column.min(), high=column.max(), size=1)[0])
                goes_right = column >= cut
                if goes_right.any() and not goes_right.all():
                    split_class[node], threshold[node] = int(j), cut
                    # Depth-first, left first: the right child waits below the left.
                    stack.append((rows[goes_right], to_go - 1, node, right))
                    stack.append((rows[~goes_right], to_go - 1, node, left))
                    continue
            # float32 sum over float32 divided: what np.mean of his node's float32 array returns
            mean_p = probs[rows].sum(axis=0) / len(rows)
            mean_y = np.bincount(labels[rows], minlength=n_classes) / len(rows)
            shifts[node] = mean_y - mean_p.astype(np.float64)
        self.split_class, self.left, self.right = map(np.array, (split_class, left, right))
        self.threshold = np.array(threshold, dtype=np.float32)
        self.shift = np.zeros((len(left), n_classes))
        for node, shift in shifts.items():
            self.shift[node] = shift

    def corrected(self, probs: np.ndarray) -> np.ndarray:
        """``p + (mean_y - mean_p)`` of each point's leaf."""
        node = np.zeros(len(probs), dtype=int)
        inner = np.flatnonzero(self.left[node] >= 0)
        while len(inner):
            at = node[inner]
            right = probs[inner, self.split_class[at]] >= self.threshold[at]
            node[inner] = np.where(right, self.right[at], self.left[at])
            inner = inner[self.left[node[inner]] >= 0]
        return probs.astype(np.float64) + self.shift[node]


def grow_forest(probs, y, depth, n_trees, seed) -> list[_Tree]:
    """``RandomSplitCalibrationForest(n_trees, depth).fit(p, y, random_seed=seed)``."""
    rs = np.random.RandomState(seed)  # the legacy stream np.random.seed(seed) starts
    return [_Tree(probs, y, depth, rs) for _ in range(n_trees)]


def forest_predictions(trees: list[_Tree], probs: np.ndarray, crop: float) -> np.ndarray:
    """The trees' corrected predictions averaged, then his ``force_p_to_simplex``."""
    total = np.zeros(probs.shape)
    for tree in trees:
        total += tree.corrected(probs)
    return force_p_to_simplex(total / len(trees), crop)


class ValkRandomForest(Calibrator):
    """Valk's random calibration forest, his code's procedure (module docstring).

    Parameters
    ----------
    n_trees : int
        Trees per forest (his: 250).
    depths : tuple of int
        The depths his 10-fold CV chooses from (1 to 12).
    n_cv_folds : int
    seed : int
        The legacy generator's seed at every forest fit (his: 0).
    temperature : bool
        Temperature-scale first as his code does (`valk_temperature`; his ``rfTS``), the
        forest then grown on his float32 scaled probabilities.
    ts_stop : float in [-1, 1] or None
        With ``temperature``: None takes the temperature where his BFGS stops; a number
        takes `accepted_temperature` (0: the zero of his gradient estimate, -1 and 1: the
        ends of the interval his stopping test accepts).
    """

    _parameter_constraints = {
        "n_trees": COUNT,
        "n_cv_folds": COUNT,
        "ts_stop": NoneOr(Number(-1.0)),
    }

    def __init__(
        self, n_trees=250, depths=DEPTHS, n_cv_folds=10, seed=0, temperature=False, ts_stop=None
    ):
        self.n_trees = n_trees
        self.depths = depths
        self.n_cv_folds = n_cv_folds
        self.seed = seed
        self.temperature = temperature
        self.ts_stop = ts_stop

    def _probabilities(self, logits):
        return valk_probabilities(logits, self.temperature_ if self.temperature else None)

    def _fit(self, logits, y):
        from sklearn.model_selection import KFold

        if self.ts_stop is not None and not self.temperature:
            raise ValueError("ts_stop picks a temperature: it needs temperature=True")
        if self.temperature:
            self.temperature_ = (
                valk_temperature(logits, y)
                if self.ts_stop is None
                else accepted_temperature(logits, y, float(self.ts_stop))
            )
        probs = self._probabilities(logits)
        self.crop_ = default_epsilon(probs.shape[1])
        folds = list(KFold(int(self.n_cv_folds), shuffle=True, random_state=1).split(probs))
        self.depth_scores_ = [self._depth_score(probs, y, folds, d) for d in self.depths]
        self.depth_ = int(list(self.depths)[int(np.argmin(self.depth_scores_))])
        self.trees_ = grow_forest(probs, y, self.depth_, int(self.n_trees), self.seed)

    def _depth_score(self, probs, y, folds, depth) -> float:
        """His find_depth_with_cv: the mean over folds of the held-out log-loss, scored as
        scikit-learn scored it then (``clip=1e-15``)."""
        scores = []
        for fit, held in folds:
            trees = grow_forest(probs[fit], y[fit], depth, int(self.n_trees), self.seed)
            predictions = forest_predictions(trees, probs[held], self.crop_)
            scores.append(sklearn_2022_log_loss(predictions, y[held]))
        return float(np.mean(scores))

    def _predict_proba(self, logits):
        return forest_predictions(self.trees_, self._probabilities(logits), self.crop_)
