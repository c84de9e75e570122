"""numpy 1.x's ``argsort`` (introsort) and ``argpartition`` (introselect), for reference
code whose numbers depend on how they order equal values.

Where values are distinct every correct algorithm gives one answer. Where they tie, which
of the tied indices comes first is whatever the algorithm's swaps leave, and the papers'
code ran numpy 1.x (Valk: 1.19; Gupta, 2020: before 1.25), whose classic introsort and
introselect (median of 3, unguarded partition) this module follows step by step:

- ``argsort``: ``np.argsort(v)`` (``kind="quicksort"``). Valk's equal-size bins and Gupta's
  KS error sort scores with it; a run of equal scores that straddles a bin edge, or a
  cumulative curve inside a run, depends on the order (`calbench.metrics.binned`,
  `calbench.metrics.ks`).
- ``argpartition`` / ``k_smallest``: ``np.argpartition(d, k)``, the neighbours of Valk's
  KNN where a row of distances is NaN (NaN sorts last and no NaN is less than another) or
  ties at the k-th place.

numpy 2 sorts and selects 32- and 64-bit types with x86-simd-sort where the CPU has AVX2 or
AVX-512 and orders ties otherwise (measured with numpy 2.4 on this project's AVX2 machines,
float32 and float64 alike), so the reference code's output would depend on the machine.
16-bit types still take the classic code there, which the tests use to check this one.
"""

from __future__ import annotations

import functools

import numpy as np


def _ranks(values) -> list[int]:
    """Dense ranks of the values as Python ints, NaN above every number and equal to each
    other: the order numpy's ``@TYPE@_LT`` compares by, so comparing the ranks is comparing
    the values (and far quicker in Python than comparing floats with the NaN test)."""
    values = np.asarray(values)
    return np.unique(values, return_inverse=True)[1].ravel().tolist()


def _heapsort(v: list, t: list, low: int, high: int) -> None:
    """numpy's ``aheapsort`` of ``t[low:high + 1]`` by ``v``, in place: introsort's way out
    where the partitions grow too deep."""
    n = high - low + 1
    a = t[low : high + 1]

    def sift(i: int, size: int, index: int) -> None:
        j = 2 * i
        while j <= size:
            if j < size and v[a[j - 1]] < v[a[j]]:
                j += 1
            if v[index] < v[a[j - 1]]:
                a[i - 1] = a[j - 1]
                i, j = j, 2 * j
            else:
                break
        a[i - 1] = index

    for start in range(n >> 1, 0, -1):
        sift(start, n, a[start - 1])
    for size in range(n, 1, -1):
        last = a[size - 1]
        a[size - 1] = a[0]
        sift(1, size - 1, last)
    t[low : high + 1] = a


def _introsort(v: list) -> list:
    """numpy 1.x's ``aquicksort`` over the (rank) values ``v``: the permutation."""
    n = len(v)
    t = list(range(n))
    low, high = 0, n - 1
    stack = []
    depth = 2 * (n.bit_length() - 1)
    while True:
        if depth < 0:
            _heapsort(v, t, low, high)
        else:
            while high - low > 15:  # SMALL_QUICKSORT
                mid = low + ((high - low) >> 1)
                if v[t[mid]] < v[t[low]]:
                    t[mid], t[low] = t[low], t[mid]
                if v[t[high]] < v[t[mid]]:
                    t[high], t[mid] = t[mid], t[high]
                if v[t[mid]] < v[t[low]]:
                    t[mid], t[low] = t[low], t[mid]
                pivot = v[t[mid]]
                i, j = low, high - 1
                t[mid], t[j] = t[j], t[mid]
                while True:  # unguarded partition
                    i += 1
                    while v[t[i]] < pivot:
                        i += 1
                    j -= 1
                    while pivot < v[t[j]]:
                        j -= 1
                    if i >= j:
                        break
                    t[i], t[j] = t[j], t[i]
                t[i], t[high - 1] = t[high - 1], t[i]
                depth -= 1
                if i - low < high - i:  # the larger side waits on the stack
                    stack.append((i + 1, high, depth))
                    high = i - 1
                else:
                    stack.append((low, i - 1, depth))
                    low = i + 1
            for i in range(low + 1, high + 1):  # insertion sort
                index = t[i]
                value = v[index]
                j = i
                while j > low and value < v[t[j - 1]]:
                    t[j] = t[j - 1]
                    j -= 1
                t[j] = index
        if not stack:
            return t
        low, high, depth = stack.pop()


def argsort(values) -> np.ndarray:
    """numpy 1.x's ``np.argsort(values)`` of a 1-d array. Without ties every sort gives
    this order, so numpy's own stable sort answers; with ties, the introsort decides."""
    values = np.asarray(values).ravel()
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    if not (ordered[1:] == ordered[:-1]).any() and np.isnan(ordered[-2:]).sum() < 2:
        return order
    return np.array(_introsort(_ranks(values)), dtype=np.intp)


def argpartition(values, kth: int) -> np.ndarray:
    """numpy 1.x's ``np.argpartition(values, kth)`` of one row (``aintroselect``)."""
    v = _ranks(values)
    n = len(v)
    t = list(range(n))
    if kth < 3:  # numpy's O(n * kth) selection for a very small kth
        for i in range(kth + 1):
            low, low_value = i, v[t[i]]
            for j in range(i + 1, n):
                if v[t[j]] < low_value:
                    low, low_value = j, v[t[j]]
            t[i], t[low] = t[low], t[i]
        return np.array(t)
    if kth == n - 1:  # inexact types: the last of the largest goes to the end
        top, top_value = 0, v[0]
        for j in range(1, n):
            if not v[t[j]] < top_value:
                top, top_value = j, v[t[j]]
        t[kth], t[top] = t[top], t[kth]
        return np.array(t)
    low, high = 0, n - 1
    depth = 2 * (n.bit_length() - 1)
    while low + 1 < high:
        ll, hh = low + 1, high
        if depth <= 0 and hh - ll >= 5:
            raise NotImplementedError("numpy's median-of-medians fallback is not followed")
        mid = low + (high - low) // 2
        # median of 3 to low, the smallest of the 3 to low + 1
        if v[t[high]] < v[t[mid]]:
            t[high], t[mid] = t[mid], t[high]
        if v[t[high]] < v[t[low]]:
            t[high], t[low] = t[low], t[high]
        if v[t[low]] < v[t[mid]]:
            t[low], t[mid] = t[mid], t[low]
        t[mid], t[low + 1] = t[low + 1], t[mid]
        depth -= 1
        pivot = v[t[low]]
        while True:  # unguarded partition
            ll += 1
            while v[t[ll]] < pivot:
                ll += 1
            hh -= 1
            while pivot < v[t[hh]]:
                hh -= 1
            if hh < ll:
                break
            t[ll], t[hh] = t[hh], t[ll]
        t[low], t[hh] = t[hh], t[low]
        if hh >= kth:
            high = hh - 1
        if hh <= kth:
            low = ll
    if high == low + 1 and v[t[high]] < v[t[low]]:
        t[high], t[low] = t[low], t[high]
    return np.array(t)


@functools.cache
def _all_equal(n: int, kth: int) -> np.ndarray:
    """The order introselect leaves a row of n equal values (or n NaN) in."""
    return argpartition(np.zeros(n), kth)


def k_smallest(distances: np.ndarray, k: int) -> np.ndarray:
    """``np.argpartition(distances, k)[:, :k]`` as numpy 1.x took it, row by row: numpy's
    own where the k-th smallest is unique (any algorithm takes the same indices), numpy
    1's introselect where NaN or a tie at the k-th place leaves the choice to its swaps."""
    order = np.argpartition(distances, k, axis=1)
    nearest = order[:, :k]
    # The k taken are the k smallest, so the k-th smallest is their largest.
    tied = (
        np.take_along_axis(distances, nearest, 1).max(axis=1)
        == np.take_along_axis(distances, order[:, k : k + 1], 1).ravel()
    )
    nan = np.isnan(distances)
    for row in np.flatnonzero(nan.all(axis=1)):
        nearest[row] = _all_equal(distances.shape[1], k)[:k]
    for row in np.flatnonzero(tied | (nan.any(axis=1) & ~nan.all(axis=1))):
        nearest[row] = argpartition(distances[row], k)[:k]
    return nearest
