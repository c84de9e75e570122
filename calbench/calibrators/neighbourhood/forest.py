"""Random calibration forest (Valk 3.2): averaged random calibration trees.

A tree splits the simplex breadth-first: at each node a random class j and a threshold
uniform between the smallest and largest ``p_j`` of the node's calibration points; points
with ``p_j >= r`` go right. After ``log2(n_bins)`` levels every leaf corrects its points by
the mean of ``p_i - y_i`` over the calibration points it holds; the forest averages the
trees' corrected predictions and crops them (Valk Algorithm 2).

Trees are grown level by level with array operations over all nodes of a level (no Python
loop over nodes or samples). A node that cannot be split (one point, or equal values)
sends everything right, so it behaves as a leaf and no test point reaches an empty leaf.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix

from calbench.calibrators.base import Calibrator
from calbench.calibrators.neighbourhood.kernel import crop, default_epsilon
from calbench.errors import CalbenchError
from calbench.simplex import softmax


class RandomCalibrationForest(Calibrator):
    """Parameters
    ----------
    n_trees : int
    n_bins : int
        Leaves per tree, a power of two (Valk's grid is 2^1 .. 2^12).
    epsilon : float or None
        Cropping constant; None takes Valk's default for the number of classes.
    cropping : {"outside", "clip"}
        How outputs return to the simplex (`calbench.calibrators.neighbourhood.crop`):
        ``outside`` as Valk's code, ``clip`` as his Algorithm 2 as printed.
    random_state : int
    """

    input_kind = "probabilities"

    def __init__(self, n_trees=250, n_bins=32, epsilon=None, cropping="outside", random_state=0):
        self.n_trees = n_trees
        self.n_bins = n_bins
        self.epsilon = epsilon
        self.cropping = cropping
        self.random_state = random_state

    def _fit(self, logits, y):
        n_bins = int(self.n_bins)
        depth = n_bins.bit_length() - 1
        if 2**depth != n_bins:
            raise CalbenchError(
                f"forest n_bins must be a power of two (every level splits every bin); "
                f"got {n_bins}."
            )
        probs = softmax(logits)
        n, k = probs.shape
        rng = np.random.default_rng(self.random_state)
        rows = np.arange(n)
        self.depth_ = depth
        self.split_class_ = np.empty((self.n_trees, max(n_bins - 1, 1)), dtype=np.int64)
        self.threshold_ = np.empty((self.n_trees, max(n_bins - 1, 1)))
        self.leaf_of_calibration_ = np.empty((self.n_trees, n), dtype=np.int64)
        for t in range(self.n_trees):
            node = np.zeros(n, dtype=np.int64)
            for level in range(depth):
                n_nodes = 2**level
                first = n_nodes - 1  # nodes of a level are stored contiguously
                classes = rng.integers(0, k, n_nodes)
                values = probs[rows, classes[node]]
                low = np.full(n_nodes, np.inf)
                high = np.full(n_nodes, -np.inf)
                np.minimum.at(low, node, values)
                np.maximum.at(high, node, values)
                span = np.where(high > low, high - low, 0.0)  # empty nodes: inf - inf
                cut = low + span * rng.random(n_nodes)
                cut = np.where(cut > low, cut, high)  # a draw of exactly 0 still splits
                cut = np.where(high > low, cut, -np.inf)  # unsplittable: all go right
                self.split_class_[t, first : first + n_nodes] = classes
                self.threshold_[t, first : first + n_nodes] = cut
                node = 2 * node + (values >= cut[node])
            self.leaf_of_calibration_[t] = node
        one_hot = np.zeros_like(probs)
        one_hot[rows, y] = 1.0
        self.errors_ = probs - one_hot
        self.epsilon_ = default_epsilon(k) if self.epsilon is None else float(self.epsilon)

    def _leaves(self, tree: int, probs: np.ndarray) -> np.ndarray:
        rows = np.arange(len(probs))
        node = np.zeros(len(probs), dtype=np.int64)
        for level in range(self.depth_):
            index = 2**level - 1 + node
            values = probs[rows, self.split_class_[tree, index]]
            node = 2 * node + (values >= self.threshold_[tree, index])
        return node

    def _predict_proba(self, logits):
        probs = softmax(logits)
        n_leaves, n_cal = 2**self.depth_, len(self.errors_)
        ones, columns = np.ones(n_cal), np.arange(n_cal)
        correction = np.zeros_like(probs)
        for t in range(self.n_trees):
            leaf_cal = self.leaf_of_calibration_[t]
            # Leaf sums of the errors as one sparse product (np.add.at is ~50x slower).
            membership = csr_matrix((ones, (leaf_cal, columns)), shape=(n_leaves, n_cal))
            sums = membership @ self.errors_
            counts = np.bincount(leaf_cal, minlength=n_leaves)
            leaves = self._leaves(t, probs)
            correction += sums[leaves] / counts[leaves, None]
        return crop(probs - correction / self.n_trees, self.epsilon_, self.cropping)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "forest": (RandomCalibrationForest, {}),
}
