"""The marks of a table value whose cell is not a plain result: its predictions held
certainties the labels refuted (‡), or its fit stopped before converging (§).

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

from calbench.metrics.scoring import (
    REFUTED_BELOW,
    REFUTED_COST,
    REFUTED_MARK,
    UNCONVERGED_MARK,
)
from calbench.tables.layouts import RankedTable


def mark_wrong_certainties(table: RankedTable, rows: pd.DataFrame) -> RankedTable:
    """``table`` with `RankedTable.flagged` set on the values whose stored cells have
    wrong certainties (cells stored before the count existed have none to read)."""
    flagged = _values_of_cells_with(table, rows, "wrong_certainties")
    if flagged is not None:
        table.flagged = flagged
        table.flag_note = (
            f"{REFUTED_MARK} the method's test predictions gave some labels a probability below "
            f"{REFUTED_BELOW:g} (stored row wrong_certainties): certainties the labels "
            f"refuted, {REFUTED_COST}."
        )
    return table


def mark_unconverged(table: RankedTable, rows: pd.DataFrame) -> RankedTable:
    """``table`` with `RankedTable.unconverged` set on the values whose stored cells' fits
    stopped before converging in some fold (row ``fit_unconverged``): such a number is
    not the method's result, and the table says so beside it."""
    marked = _values_of_cells_with(table, rows, "fit_unconverged")
    if marked is not None:
        table.unconverged = marked
        table.unconverged_note = (
            f"{UNCONVERGED_MARK} the method's fit stopped before converging in some fold "
            "(stored row fit_unconverged; the cell's warning says where): not the method's "
            "optimum."
        )
    return table


def _values_of_cells_with(table: RankedTable, rows: pd.DataFrame, metric: str):
    """Which values come from a cell whose stored ``metric`` is positive (None: none)."""
    if table.sources is None or metric not in set(rows["metric"]):
        return None
    per_cell = rows[rows["metric"] == metric].groupby("config_hash")["value"].sum()
    marked = np.zeros(table.values.shape, dtype=bool)
    for i, row in enumerate(table.sources):
        for j, source in enumerate(row):
            if source is not None and not np.isnan(table.values[i, j]):
                marked[i, j] = any(per_cell.get(h, 0.0) > 0 for h in source[1])
    return marked if marked.any() else None
