"""Putting calibrated ranked values back into probability vectors: the r-th class takes its
value, the classes below share the rest (water-filling), so the ranking is kept."""

from __future__ import annotations

import numpy as np

#: Relative margin that keeps a lower class strictly below the one above it: argmax and a
#: stable argsort take the first of tied classes, which could be a lower-ranked one.
MARGIN = 1e-9
#: A floor on the weights the rest is shared by, so rows whose other classes underflowed to
#: (or below) the subnormal range share it evenly instead of dividing 0 by 0.
_TINY_WEIGHT = 1e-300


def water_fill(weights: np.ndarray, total: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Split each row's ``total`` over its columns in proportion to ``weights``, none above
    the row's ``cap``: the largest are capped and the others scaled up to make up the rest.
    Rows need ``total <= n_columns * cap`` (the caller ensures it)."""
    n, m = weights.shape
    if m == 0:
        return weights
    w = np.maximum(weights, _TINY_WEIGHT)
    order = np.argsort(-w, axis=1, kind="stable")
    sorted_w = np.take_along_axis(w, order, axis=1)
    tails = np.cumsum(sorted_w[:, ::-1], axis=1)[:, ::-1]  # sum of columns t.. (descending)
    capped = np.arange(m)[None, :]
    scale = (total[:, None] - capped * cap[:, None]) / tails
    # t columns capped is right when the scaled (t+1)-th largest fits under the cap.
    fits = scale * sorted_w <= cap[:, None]
    first = np.where(fits.any(axis=1), fits.argmax(axis=1), m - 1)
    s = scale[np.arange(n), first]
    filled = np.minimum(w * s[:, None], cap[:, None])
    return np.where(np.isfinite(filled), filled, cap[:, None])


def floor_fill(weights: np.ndarray, total: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Split each row's ``total`` in proportion to ``weights``, none below the row's
    ``floor``: the smallest are raised to it and the others scaled down to make up the
    rest (the mirror of `water_fill`). Rows need ``total >= n_columns * floor``."""
    n, m = weights.shape
    w = np.maximum(weights, _TINY_WEIGHT)
    order = np.argsort(w, axis=1, kind="stable")
    sorted_w = np.take_along_axis(w, order, axis=1)
    tails = np.cumsum(sorted_w[:, ::-1], axis=1)[:, ::-1]  # sum of columns t.. (ascending)
    raised = np.arange(m)[None, :]
    scale = (total[:, None] - raised * floor[:, None]) / tails
    fits = scale * sorted_w >= floor[:, None]
    first = np.where(fits.any(axis=1), fits.argmax(axis=1), m - 1)
    s = scale[np.arange(n), first]
    return np.maximum(w * s[:, None], floor[:, None])


def set_ranked_value(out, ranked, r: int, value) -> np.ndarray:
    """Give each row's r-th ranked class (0-based) ``value``, keep the ranks above it, and
    share the rest below it by `water_fill`; the value is moved into the feasible range."""
    rows = np.arange(len(out))
    k = out.shape[1]
    above = np.take_along_axis(out, ranked[:, :r], axis=1).sum(axis=1)
    free = np.maximum(1.0 - above, 0.0)
    ceiling = free if r == 0 else np.minimum(free, out[rows, ranked[:, r - 1]] * (1 - MARGIN))
    lower = ranked[:, r + 1 :]
    m = k - r - 1
    if m == 0:
        out[rows, ranked[:, r]] = free
        return out
    floor = free / (1.0 + m * (1 - MARGIN))  # below it, the rest cannot fit under the value
    v = np.clip(value, floor, np.maximum(ceiling, floor))
    out[rows, ranked[:, r]] = v
    filled = water_fill(np.take_along_axis(out, lower, axis=1), free - v, v * (1 - MARGIN))
    np.put_along_axis(out, lower, filled, axis=1)
    return out


def place_members(out, members, share, rest, total) -> np.ndarray:
    """Put the top-w members' ``share`` in place; the remaining classes share 1 - total
    below the smallest member (`water_fill`)."""
    np.put_along_axis(out, members, share, axis=1)
    if rest.shape[1]:
        filled = water_fill(
            np.take_along_axis(out, rest, axis=1),
            np.maximum(1.0 - total, 0.0),
            share.min(axis=1) * (1 - MARGIN),
        )
        np.put_along_axis(out, rest, filled, axis=1)
    return out
