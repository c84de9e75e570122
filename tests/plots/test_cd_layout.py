"""The critical-difference diagram's names never touch a line or each other, for a short
and a long list of methods (the leaderboard of 27 methods drew lines through its names)."""

import numpy as np
import pandas as pd
import pytest

from calbench.plots.cd_diagram import _cliques, _height, cd_diagram
from calbench.plots.output import plt
from calbench.stats.ranks import friedman


def _drawn(n_methods: int, longest: str):
    rng = np.random.default_rng(1)
    names = [f"m{i}" for i in range(n_methods - 1)] + [longest]
    values = pd.DataFrame(rng.normal(size=(8, n_methods)) + np.arange(n_methods) * 0.3)
    values.columns = names
    result = friedman(values, False)
    height = _height(n_methods, len(_cliques(result.average_ranks.to_numpy(), 1.0)))
    fig = plt.figure(figsize=(7, height + 0.35))
    ax = fig.add_axes((0, 0, 1, height / (height + 0.35)))
    cd_diagram(ax, result, title="t")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    names_boxes = [t.get_window_extent(renderer) for t in ax.texts if "(" in t.get_text()]
    segments = [ax.transData.transform(np.column_stack(line.get_data())) for line in ax.lines]
    plt.close(fig)
    return names_boxes, segments


@pytest.mark.parametrize("n_methods", [3, 8, 27])
def test_no_line_crosses_a_name_and_no_two_names_overlap(n_methods):
    boxes, segments = _drawn(n_methods, "venn_abers_ovr_long_name")
    assert len(boxes) == n_methods
    for box in boxes:
        for line in segments:
            for (x0, y0), (x1, y1) in zip(line[:-1], line[1:], strict=True):
                if x0 == x1:  # a vertical stretch: does it pass through the name?
                    low, high = sorted((y0, y1))
                    inside = box.x0 < x0 < box.x1 and low < box.y1 and high > box.y0
                    assert not inside
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)
