"""The mark of a table value whose cell's predictions held certainties the labels refuted.

Every cell stores ``wrong_certainties``: its test rows whose label got a probability below
1e-9 (`calbench.metrics.scoring.wrong_certainties`). One such row adds more than 20.7 nats
to a summed log-loss, and a probability of exactly 0 about 708, so a method's log-loss (and
its ranks) can be its few certain mistakes rather than its calibration. Each value drawn
from such a cell gets ‡ and the table's title says why, so a reader sees the cause beside
the number (`calbench.calibrators.bounds` has the bound that removes them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.metrics.scoring import REFUTED_BELOW, REFUTED_MARK
from calbench.tables.layouts import RankedTable


def mark_wrong_certainties(table: RankedTable, rows: pd.DataFrame) -> RankedTable:
    """``table`` with `RankedTable.flagged` set on the values whose stored cells have
    wrong certainties (cells stored before the count existed have none to read)."""
    if table.sources is None or "wrong_certainties" not in set(rows["metric"]):
        return table
    stored = rows[rows["metric"] == "wrong_certainties"]
    per_cell = stored.groupby("config_hash")["value"].sum()
    flagged = np.zeros(table.values.shape, dtype=bool)
    for i, row in enumerate(table.sources):
        for j, source in enumerate(row):
            if source is not None and not np.isnan(table.values[i, j]):
                flagged[i, j] = any(per_cell.get(h, 0.0) > 0 for h in source[1])
    if flagged.any():
        table.flagged = flagged
        table.flag_note = (
            f"{REFUTED_MARK} the method's test predictions gave some labels a probability below "
            f"{REFUTED_BELOW:g} (stored row wrong_certainties): certainties the labels "
            "refuted, each adding over 20.7 nats to its summed log-loss."
        )
    return table
