"""A method's grid as inner CV walks it: the order of its points (`grid_path`) and the
points beyond its edges (`edge_points`, for ``protocol.widen_edges``)."""

from __future__ import annotations

from sklearn.model_selection import ParameterGrid


def _numeric_values(values) -> list | None:
    """The grid values as numbers, where all are positive numbers and there are two or more."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) < 2 or len(numbers) != len(values) or min(numbers) <= 0:
        return None
    return sorted(numbers)


def edge_choices(grid: dict, chosen: dict) -> dict[str, str]:
    """Key -> "largest" or "smallest" for each numeric key of ``grid`` whose ``chosen``
    value lies at that edge of its values."""
    out = {}
    for key, values in (grid or {}).items():
        ordered = _numeric_values(values)
        if ordered is None or key not in chosen:
            continue
        if chosen[key] == ordered[-1]:
            out[key] = "largest"
        elif chosen[key] == ordered[0]:
            out[key] = "smallest"
    return out


def edge_points(grid: dict, chosen: dict) -> list[dict]:
    """The points `select_and_fit`'s ``widen_edges`` adds where ``chosen`` lies at an edge
    of ``grid``: for each numeric key with two or more positive values whose chosen value is
    the largest (smallest), the next value of the grid's spacing beyond it (its ratio of
    the last two values), with every value of the other keys; none where it is inside."""
    extra = []
    for key, side in edge_choices(grid, chosen).items():
        ordered = _numeric_values(grid[key])
        step = ordered[-1] / ordered[-2] if side == "largest" else ordered[0] / ordered[1]
        beyond = chosen[key] * step
        beyond = int(round(beyond)) if all(isinstance(v, int) for v in ordered) else float(beyond)
        if beyond in ordered:
            continue
        others = {k: v for k, v in grid.items() if k != key}
        extra += [{**p, key: beyond} for p in ParameterGrid({**others, key: [beyond]})]
    return extra


def grid_path(grid: dict | None, strongest_first: bool = False) -> list[dict]:
    """The grid's points in the order inner CV visits them: scikit-learn's ParameterGrid
    order (the last key fastest, values as listed), or with ``strongest_first`` the rows of
    the first key from its largest value down (the strongest ``reg_lambda`` first), so that
    ``grid_patience`` can stop before the weakest, slowest fits. Within a row the last key
    keeps ParameterGrid's order, restarting on every row: warm starts that ran back and
    forth instead (a boustrophedon) took 3.6x the L-BFGS iterations on a 2000 x 100
    ms_odir grid, its weakest penalties running into max_iter."""
    if not grid:
        return [{}]
    points = list(ParameterGrid(grid))
    if not strongest_first:
        return points
    first = sorted(grid)[0]
    rows = sorted({str(p[first]): p[first] for p in points}.values(), key=_order_key, reverse=True)
    return [p for value in rows for p in points if p[first] == value]


def _order_key(value):
    """Numbers by value; anything else (criterion specs, strings) by its text."""
    return (0, float(value), "") if isinstance(value, int | float) else (1, 0.0, str(value))
