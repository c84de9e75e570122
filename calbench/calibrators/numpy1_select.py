"""numpy 1.x's ``argpartition`` (its introselect), for reference code whose neighbours
depend on it.

``np.argpartition(d, k)[:, :k]`` names the same k indices under every algorithm where the
k-th smallest value is unique. Where it is not -- a row of NaN (all equal for the sort:
NaN sorts last and no NaN is less than another) or a tie at the k-th place -- which of the
tied indices are taken is whatever the algorithm's swaps leave. Valk ran numpy 1.19, whose
introselect (median of 3, unguarded partition) this module follows step by step. numpy 2
selects 32- and 64-bit types with x86-simd-sort where the CPU has AVX2 or AVX-512 and takes
other indices (measured with numpy 2.4 on this project's AVX2 machines, float32 and
float64 alike), so the reference code's output would depend on the machine. 16-bit types
still take the classic introselect there, which the tests use to check this one.
"""

from __future__ import annotations

import functools

import numpy as np


def _less(a: float, b: float) -> bool:
    """numpy's ``@TYPE@_LT`` for floats: NaN after every number."""
    return a < b or (b != b and a == a)


def argpartition(values, kth: int) -> np.ndarray:
    """numpy 1.x's ``np.argpartition(values, kth)`` of one row (``aintroselect``)."""
    v = [float(x) for x in values]
    n = len(v)
    t = list(range(n))
    if kth < 3:  # numpy's O(n * kth) selection for a very small kth
        for i in range(kth + 1):
            low, low_value = i, v[t[i]]
            for j in range(i + 1, n):
                if _less(v[t[j]], low_value):
                    low, low_value = j, v[t[j]]
            t[i], t[low] = t[low], t[i]
        return np.array(t)
    if kth == n - 1:  # inexact types: the last of the largest goes to the end
        top, top_value = 0, v[0]
        for j in range(1, n):
            if not _less(v[t[j]], top_value):
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
        if _less(v[t[high]], v[t[mid]]):
            t[high], t[mid] = t[mid], t[high]
        if _less(v[t[high]], v[t[low]]):
            t[high], t[low] = t[low], t[high]
        if _less(v[t[low]], v[t[mid]]):
            t[low], t[mid] = t[mid], t[low]
        t[mid], t[low + 1] = t[low + 1], t[mid]
        depth -= 1
        pivot = v[t[low]]
        while True:  # unguarded partition
            ll += 1
            while _less(v[t[ll]], pivot):
                ll += 1
            hh -= 1
            while _less(pivot, v[t[hh]]):
                hh -= 1
            if hh < ll:
                break
            t[ll], t[hh] = t[hh], t[ll]
        t[low], t[hh] = t[hh], t[low]
        if hh >= kth:
            high = hh - 1
        if hh <= kth:
            low = ll
    if high == low + 1 and _less(v[t[high]], v[t[low]]):
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
