"""The batches Kull et al.'s Keras layers train on (`calbench.papers.kull2019.keras_style`):
each epoch's batch order, as numpy's seeded generator drew it, and the rows a batch of
replicas gathers them from."""

from __future__ import annotations

import numpy as np

from calbench.lazy import LazyModule

torch = LazyModule("torch")


class Permutations:
    """The epochs' batch orders of one numpy generator, drawn once and shared: a replica
    at epoch ``e`` of a stage reads permutation ``offset + e``, as each Keras model
    reseeded the global generator and then drew one permutation per epoch it ran."""

    def __init__(self, n: int, seed: int):
        self.n, self._random, self._drawn = n, np.random.RandomState(seed), []

    def __getitem__(self, index: int) -> np.ndarray:
        while len(self._drawn) <= index:
            order = np.arange(self.n)
            self._random.shuffle(order)
            self._drawn.append(order)
        return self._drawn[index]


class Rows:
    """The rows the replicas train on: one set for all (``x`` (n, k), ``y`` (n,)), or one
    per inner fold of equal size (``x`` (F, n, k), ``y`` (F, n); ``fold_of`` (R,) names
    each replica's fold), kept as ``x`` (rows, k) and its labels one-hot (``onehot``,
    x's dtype). A fold's epoch orders index its own rows (`orders` moves them to its
    block): a batch gathers the same values as the fold's own ``x[index]``."""

    def __init__(self, x, y, fold_of=None):
        self.n, self.fold_of, k = x.shape[-2], fold_of, x.shape[-1]
        self.x = x.reshape(-1, k)
        self.onehot = torch.nn.functional.one_hot(y.reshape(-1), k).to(x.dtype)

    def orders(self, live, orders):
        """The live replicas' epoch orders (one row each, or one shared) as rows of ``x``."""
        if self.fold_of is None:
            return orders
        return orders + self.n * self.fold_of[live][:, None]
