"""A grid whose choice lies at its edge is widened (``protocol.widen_edges``): the new points
follow the grid's own spacing, and inner CV then finds the value the data call for."""

import pytest

from calbench.calibrators.base import Calibrator
from calbench.runner.grid import edge_points
from calbench.runner.protocols import Protocol
from calbench.runner.selection import select_and_fit
from calbench.simplex import softmax


class FixedTemperature(Calibrator):
    """``softmax(z / temperature)``: nothing fitted, the temperature chosen by the grid."""

    def __init__(self, temperature=1.0):
        self.temperature = temperature

    def _fit(self, logits, y):
        pass

    def _predict_proba(self, logits):
        return softmax(logits / self.temperature)


def test_edge_points_follow_the_grids_spacing_at_the_edge_the_choice_is_on():
    grid = {"reg_lambda": [0.01, 0.1, 1.0], "reg_mu": [1.0, 10.0]}
    assert edge_points(grid, {"reg_lambda": 1.0, "reg_mu": 1.0}) == [
        {"reg_lambda": 10.0, "reg_mu": 1.0},
        {"reg_lambda": 10.0, "reg_mu": 10.0},
        {"reg_lambda": 0.01, "reg_mu": 0.1},
        {"reg_lambda": 0.1, "reg_mu": 0.1},
        {"reg_lambda": 1.0, "reg_mu": 0.1},
    ]
    assert edge_points(grid, {"reg_lambda": 0.1, "reg_mu": 10.0})[0] == pytest.approx(
        {"reg_lambda": 0.01, "reg_mu": 100.0}
    )
    assert edge_points({"n_neighbors": [16, 32]}, {"n_neighbors": 32}) == [{"n_neighbors": 64}]
    # Inside the grid, one value, or values that are not positive numbers: nothing to add.
    assert edge_points({"k": [1.0, 2.0, 4.0]}, {"k": 2.0}) == []
    assert edge_points({"k": [1.0]}, {"k": 1.0}) == []
    assert edge_points({"k": ["a", "b"]}, {"k": "b"}) == []
    assert edge_points({"k": [0.0, 1.0]}, {"k": 0.0}) == []


def test_a_choice_at_the_grids_edge_is_widened_to_the_temperature_the_data_were_drawn_at(rng):
    """Labels drawn from softmax(z / 8): the log-loss is lowest near T = 8, so a grid of
    1 and 2 stops short; widened twice by its own doubling it reaches 8."""
    logits = rng.normal(size=(4000, 5)) * 12
    y = (rng.random((4000, 1)) > softmax(logits / 8.0).cumsum(axis=1)).sum(axis=1)
    grid = {"temperature": [1.0, 2.0]}
    options = {"inner_folds": 3, "seed": 0}
    _, plain = select_and_fit(FixedTemperature(), grid, logits, y, **options)
    assert plain == {"temperature": 2.0}
    model, widened = select_and_fit(FixedTemperature(), grid, logits, y, widen_edges=3, **options)
    assert widened == {"temperature": 8.0}
    assert model.temperature == 8.0
    _, twice = select_and_fit(FixedTemperature(), grid, logits, y, widen_edges=1, **options)
    assert twice == {"temperature": 4.0}  # one step: the new edge, not further


def test_widen_edges_is_a_protocol_option_checked_once():
    base = {"name": "holdout", "inner_folds": 5, "average_inner_models": False}
    assert Protocol.of(base).widen_edges == 0
    assert Protocol.of({**base, "widen_edges": 2}).widen_edges == 2
    with pytest.raises(ValueError, match="'widen_edges' parameter of protocol holdout"):
        Protocol.of({**base, "widen_edges": -1})


def test_a_choice_at_the_edge_on_most_folds_gets_a_note():
    import json

    import pandas as pd

    from calbench.runner.job import grid_edge_note

    grid = {"reg_lambda": [0.1, 1.0, 10.0], "reg_mu": [1.0, 3.0, 10.0]}

    def rows(*chosen):
        return pd.DataFrame({"fold": range(len(chosen)), "params": [json.dumps(c) for c in chosen]})

    note = grid_edge_note(
        grid,
        rows(
            {"reg_lambda": 10.0, "reg_mu": 1.0},
            {"reg_lambda": 10.0, "reg_mu": 3.0},
            {"reg_lambda": 1.0, "reg_mu": 10.0},
        ),
    )
    assert "reg_lambda at the largest value of its grid (10) on 2 of 3 fold(s)" in note
    assert "reg_mu" not in note  # at an edge on one fold of three each: no pattern
    assert "widen_edges" in note
    inside = rows({"reg_lambda": 1.0, "reg_mu": 1.0}, {"reg_lambda": 1.0, "reg_mu": 10.0})
    assert grid_edge_note({"reg_lambda": grid["reg_lambda"]}, inside) == ""
    assert grid_edge_note(grid, rows({"reg_lambda": 10.0}), widened=2) == ""
