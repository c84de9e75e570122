"""Ranks as the papers print them: per row, on the shown (rounded) values, ties sharing the
best rank (1, 2, 2, 4: ``min`` ranking), lower is better unless the metric says otherwise."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: What a table's caption says of its ranks (issue 59: say which convention each uses).
SHOWN_RANKS_NOTE = (
    "Ranks: ties on the shown values share the best rank (1, 1, 3), as the papers print "
    "them; the Friedman test ranks the unrounded values, ties at their average (1.5, 1.5, 3)."
)
AVERAGE_RANKS_NOTE = "Ranks per task: ties at their average (1.5, 1.5, 3), as the Friedman test's."


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
