"""numpy 1.x's argsort and argpartition (`calbench.numpy1_order`) against numpy's own
classic introsort and introselect, which numpy 2 still runs for 16-bit integers (its SIMD
sorting covers 32- and 64-bit types only): many ties, all equal, the small-kth path, and
an input that drives the introsort into its heapsort."""

import numpy as np
import pytest

import calbench.numpy1_order as numpy1
from calbench.numpy1_order import argpartition, argsort, k_smallest
from tests.papers.valk2022.test_reference_knn import _numpy1_argpartition


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


@pytest.mark.parametrize(
    "n,high", [(1, 1), (16, 2), (17, 2), (18, 3), (700, 5), (5000, 40), (5000, 30000)]
)
def test_introsort_is_numpys_classic_one(n, high):
    rng = np.random.default_rng(n + high)
    values = rng.integers(0, high, n).astype(np.int16)
    expected = np.argsort(values, kind="quicksort")
    np.testing.assert_array_equal(argsort(values), expected)
    # The same comparisons on floats: scores with these ties sort the same way.
    np.testing.assert_array_equal(argsort(values / 7.0), expected)


def test_nan_sorts_last_and_ties_with_nan():
    rng = np.random.default_rng(5)
    values = rng.integers(0, 20, 300).astype(np.float64)
    values[::9] = np.nan
    ranks = np.where(np.isnan(values), 20, values).astype(np.int16)
    np.testing.assert_array_equal(argsort(values), np.argsort(ranks, kind="quicksort"))


def _median_of_3_killer(n: int) -> np.ndarray:
    """McIlroy's adversary ("A killer adversary for quicksort", 1999) run against the port:
    values, decided lazily as it compares them, that make every partition lopsided."""
    gas = n
    value = [gas] * n
    state = {"solid": 0, "candidate": 0}

    class Lazy:
        def __init__(self, i):
            self.i = i

        def __lt__(self, other):
            x, y = self.i, other.i
            if value[x] == gas and value[y] == gas:
                frozen = x if x == state["candidate"] else y
                value[frozen] = state["solid"]
                state["solid"] += 1
            if value[x] == gas:
                state["candidate"] = x
            elif value[y] == gas:
                state["candidate"] = y
            return value[x] < value[y]

    numpy1._introsort([Lazy(i) for i in range(n)])
    return np.array(value, dtype=np.int16)


@pytest.mark.parametrize("ties", [1, 4])
def test_deep_partitions_end_in_numpys_heapsort(ties, monkeypatch):
    values = _median_of_3_killer(2000) // ties
    heapsorted = []
    heapsort = numpy1._heapsort
    monkeypatch.setattr(numpy1, "_heapsort", lambda *args: heapsorted.append(1) or heapsort(*args))
    order = np.array(numpy1._introsort(numpy1._ranks(values)))
    np.testing.assert_array_equal(order, np.argsort(values, kind="quicksort"))
    if ties == 1:
        assert heapsorted  # the adversary reached the depth limit
