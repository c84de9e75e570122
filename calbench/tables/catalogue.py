"""The table layouts by name: one record per layout, its builder and the store cells it
reads. A spec's ``layout:`` names one; `build_table` and `needed_cells` are the only ways in.

What a layout reads is ``{column: values}`` whose product is the cells (``pairs``: (method,
criterion) pairs where the criterion matters; ``ANY``: any value serves); the tests fill a
store from it, so that every shipped spec is built without knowing its layout. This module
sits above the layouts (`calbench.tables.layouts`) and Ho's curves (`calbench.tables.curves`,
which build on ``mean_std``), so neither imports the other's user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from calbench.errors import unknown_name
from calbench.tables import layouts
from calbench.tables.curves import curve_cells, curve_table
from calbench.tables.layouts import RankedTable


@dataclass(frozen=True)
class Layout:
    """A layout: ``build(spec, rows, direction) -> RankedTable`` and ``needs(spec)``;
    ``per_cell``: its values are cells' metrics, so bootstrap intervals apply (ranks over
    tasks and means over seeds are not)."""

    build: Callable[..., RankedTable]
    needs: Callable[[dict], dict]
    per_cell: bool = False


LAYOUTS: dict[str, Layout] = {
    "mean_std": Layout(layouts.mean_std, layouts.mean_std_needs),
    # Ho's risk-vs-eps curves condensed to a mean ± std table; `calbench.tables.curves`
    # also writes the full curves and their figure.
    "risk_curve": Layout(curve_table, curve_cells),
    "metrics_by_method": Layout(
        layouts.metrics_by_method, layouts.metrics_by_method_needs, per_cell=True
    ),
    "datasets_by_method": Layout(
        layouts.datasets_by_method, layouts.datasets_by_method_needs, per_cell=True
    ),
    "ranks_by_group": Layout(layouts.ranks_by_group, layouts.ranks_by_group_needs),
}


def layout_of(spec: dict) -> Layout:
    if spec.get("layout") not in LAYOUTS:
        raise unknown_name("layout", spec.get("layout"), LAYOUTS, f" (table {spec['name']})")
    return LAYOUTS[spec["layout"]]


def build_table(spec: dict, rows: pd.DataFrame, direction) -> RankedTable:
    """The table ``spec`` lays out from the store's ``rows`` (``direction(metric)``: is
    higher better)."""
    return layout_of(spec).build(spec, rows, direction)


def needed_cells(spec: dict) -> dict:
    """The store rows ``spec``'s table reads."""
    return layout_of(spec).needs(spec)
