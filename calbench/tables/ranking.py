"""Ranks as the papers print them: per row, on the shown (rounded) values, ties sharing the
best rank (1, 2, 2, 4: ``min`` ranking), lower is better unless the metric says otherwise."""

from __future__ import annotations

import numpy as np
import pandas as pd


def rank_row(values, higher_is_better: bool, decimals: int) -> np.ndarray:
    """Ranks of one row; NaN (missing or unranked) values get NaN."""
    shown = pd.Series(np.round(np.asarray(values, dtype=np.float64), decimals))
    return shown.rank(method="min", ascending=not higher_is_better).to_numpy()


def average_ranks(ranks: np.ndarray) -> np.ndarray:
    """Column means of a (rows, columns) rank matrix, ignoring missing ranks."""
    ranks = np.asarray(ranks, dtype=np.float64)
    counts = np.sum(~np.isnan(ranks), axis=0)
    totals = np.nansum(ranks, axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
