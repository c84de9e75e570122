"""numpy 1.x's argpartition (`calbench.calibrators.numpy1_select`) against numpy's own
classic introselect, which numpy 2 still runs for 16-bit integers (its SIMD selection
covers 32- and 64-bit types only): many ties, all equal, and the small-kth path."""

import numpy as np
import pytest

from calbench.calibrators.numpy1_select import argpartition, k_smallest
from tests.test_reference_knn import _numpy1_argpartition


@pytest.mark.parametrize("n,high", [(40, 3), (700, 5), (5000, 40), (5000, 30000), (300, 1)])
def test_introselect_is_numpys_classic_one(n, high):
    rng = np.random.default_rng(n + high)
    values = rng.integers(0, high, n).astype(np.int16)
    for kth in (0, 1, 2, 3, 17, n // 2, n - 2):
        np.testing.assert_array_equal(argpartition(values, kth), np.argpartition(values, kth))


def test_rows_of_nan_and_ties_take_numpy1s_indices():
    rng = np.random.default_rng(3)
    distances = rng.integers(0, 50, size=(6, 400)).astype(np.float32)  # ties at the 32nd
    distances[1] = np.nan  # a test probability of 0: the whole row NaN
    distances[2, ::7] = np.nan
    distances[3] = rng.random(400)  # a unique 32nd: numpy's own selection
    classic = _numpy1_argpartition(distances, 32)[:, :32]
    ours = k_smallest(distances, 32)
    # the same indices (their order within the k does not matter to the neighbours)
    np.testing.assert_array_equal(np.sort(ours, axis=1), np.sort(classic, axis=1))
    np.testing.assert_array_equal(ours[[0, 1, 2, 4, 5]], classic[[0, 1, 2, 4, 5]])
