"""3-class simplex calibration maps in the style of Valk Figs. 5, 7, 9, 10, 12, 14.

A map ĉ is drawn as arrows ĉ(p) - p on a grid of the simplex, over a background whose RGB
colour is (0.5, 0.5, 0.5) + lambda * CE(p) with CE(p) = p - ĉ(p) (red: class 1, green:
class 2, blue: class 3; grey: no change). Class 1 sits at the bottom left, class 2 at the
bottom right, class 3 at the top.
"""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError
from calbench.simplex import map_points, split_map

_VERTICES = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])


def to_plane(probs: np.ndarray) -> np.ndarray:
    """Barycentric coordinates -> points of the triangle."""
    return np.asarray(probs) @ _VERTICES


#: Where each class's vertex label sits, and the colour its error pushes the background to.
_LABEL_OFFSETS = np.array([[-0.04, -0.05], [0.04, -0.05], [0.0, 0.04]])
CLASS_COLOURS = ("#d62728", "#2ca02c", "#1f77b4")


def _frame(ax, title, class_names=("class 1", "class 2", "class 3")):
    ax.plot(*np.vstack([_VERTICES, _VERTICES[:1]]).T, color="black", linewidth=0.8)
    for vertex, offset, name, colour in zip(
        _VERTICES, _LABEL_OFFSETS, class_names, CLASS_COLOURS, strict=True
    ):
        x, y = vertex + offset
        ax.text(x, y, name, ha="center", va="center", fontsize=7, color=colour)
    ax.set_aspect("equal")
    ax.set_xlim(-0.12, 1.12)
    ax.set_ylim(-0.1, 0.95)
    ax.set_axis_off()
    ax.set_title(title, fontsize=9)


def colour_key(ax, colour_scale=3.5):
    """The background's key: which colour means which class is over-predicted, by how much
    (the colour is 0.5 grey plus ``colour_scale`` times the calibration error)."""
    ax.set_axis_off()
    ax.set_title("background: p - ĉ(p)", fontsize=9)
    amounts = (0.05, 0.1)
    for step, size in enumerate(amounts):
        ax.text(0.13 + 0.2 * step, 0.97, f"+{size:g}", ha="center", va="bottom", fontsize=6)
    for row, name in enumerate(("class 1", "class 2", "class 3")):
        bottom = 0.75 - 0.24 * row
        for step, size in enumerate(amounts):
            rgb = np.full(3, 0.5)
            rgb[row] += colour_scale * size
            ax.add_patch(plt_rectangle((0.05 + 0.2 * step, bottom), 0.16, 0.18, np.clip(rgb, 0, 1)))
        ax.text(0.48, bottom + 0.09, f"{name} over-predicted", va="center", fontsize=7)
    ax.add_patch(plt_rectangle((0.05, 0.03), 0.16, 0.18, (0.5, 0.5, 0.5)))
    ax.text(0.48, 0.12, "grey: calibrated", va="center", fontsize=7)
    ax.set_xlim(0, 1.3)
    ax.set_ylim(0, 1.05)
    return ax


def plt_rectangle(xy, width, height, colour):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, width, height, facecolor=colour, edgecolor="black", linewidth=0.3)


def calibration_map(ax, mapped: np.ndarray, title="", colour_scale=3.5, class_names=None):
    """Draw a calibration map ĉ given at `calbench.simplex.map_points` (``mapped``: its
    rows there, as a cell stores them) on ``ax``."""
    mapped = np.asarray(mapped)
    if mapped.ndim != 2 or mapped.shape[1] != 3:
        raise CalbenchError("Simplex maps need exactly 3 classes.")
    points, mapped = split_map(map_points()), split_map(mapped)
    error = points["background"] - mapped["background"]
    colours = np.clip(0.5 + colour_scale * error, 0.0, 1.0)
    xy = to_plane(points["background"])
    # Rasterised: thousands of markers as vector paths make a PDF slow to write and read.
    ax.scatter(xy[:, 0], xy[:, 1], c=colours, s=4, marker="h", linewidths=0, rasterized=True)
    start = to_plane(points["arrows"])
    delta = to_plane(mapped["arrows"]) - start
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
    _frame(ax, title, *([class_names] if class_names is not None else []))
    return ax


def calibration_data(ax, probs, y, title="calibration data"):
    """The calibration set's predictions coloured by label (Valk Fig. 5a)."""
    if np.asarray(probs).shape[1] != 3:
        raise CalbenchError("Simplex maps need exactly 3 classes.")
    xy = to_plane(probs)
    colours = np.array(CLASS_COLOURS)[np.asarray(y)]
    ax.scatter(xy[:, 0], xy[:, 1], c=colours, s=3, alpha=0.7, linewidths=0, rasterized=True)
    _frame(ax, title)
    return ax
