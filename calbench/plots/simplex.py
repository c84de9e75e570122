"""3-class simplex calibration maps in the style of Valk Figs. 5, 7, 9, 10, 12, 14.

A map ĉ is drawn as arrows ĉ(p) - p on a grid of the simplex, over a background whose RGB
colour is (0.5, 0.5, 0.5) + lambda * CE(p) with CE(p) = p - ĉ(p) (red: class 1, green:
class 2, blue: class 3; grey: no change). Class 1 sits at the bottom left, class 2 at the
bottom right, class 3 at the top.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError

_VERTICES = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])


def to_plane(probs: np.ndarray) -> np.ndarray:
    """Barycentric coordinates -> points of the triangle."""
    return np.asarray(probs) @ _VERTICES


def simplex_grid(step: float) -> np.ndarray:
    """Points of the simplex on a regular barycentric grid, strictly inside it."""
    ticks = np.arange(step / 2, 1.0, step)
    a, b = np.meshgrid(ticks, ticks)
    a, b = a.ravel(), b.ravel()
    inside = a + b < 1.0 - step / 4
    return np.column_stack([a[inside], b[inside], 1.0 - a[inside] - b[inside]])


def _frame(ax, title):
    ax.plot(*np.vstack([_VERTICES, _VERTICES[:1]]).T, color="black", linewidth=0.8)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(title, fontsize=9)


def calibration_map(
    ax, calibrate, title="", colour_scale=3.5, arrow_step=1 / 14, background_step=1 / 120
):
    """Draw ``calibrate(p) -> ĉ(p)`` (a function on probability rows) on ``ax``."""
    background = simplex_grid(background_step)
    error = background - calibrate(background)
    if error.shape[1] != 3:
        raise CalbenchError("Simplex maps need exactly 3 classes.")
    colours = np.clip(0.5 + colour_scale * error, 0.0, 1.0)
    xy = to_plane(background)
    ax.scatter(xy[:, 0], xy[:, 1], c=colours, s=4, marker="h", linewidths=0)
    grid = simplex_grid(arrow_step)
    start = to_plane(grid)
    delta = to_plane(calibrate(grid)) - start
    ax.quiver(
        start[:, 0],
        start[:, 1],
        delta[:, 0],
        delta[:, 1],
        angles="xy",
        scale_units="xy",
        scale=1.0,
        width=0.004,
        color="black",
    )
    _frame(ax, title)
    return ax


def calibration_data(ax, probs, y, title="calibration data"):
    """The calibration set's predictions coloured by label (Valk Fig. 5a)."""
    if np.asarray(probs).shape[1] != 3:
        raise CalbenchError("Simplex maps need exactly 3 classes.")
    xy = to_plane(probs)
    colours = np.array(["#d62728", "#2ca02c", "#1f77b4"])[np.asarray(y)]
    ax.scatter(xy[:, 0], xy[:, 1], c=colours, s=3, alpha=0.7, linewidths=0)
    _frame(ax, title)
    return ax
