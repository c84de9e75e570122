"""Figures of one task's stored predictions: simplex maps, reliability diagrams, KS graphs.

Every cell stores its per-fold test predictions (and on 3-class data its map at the simplex
grid, `calbench.results.predictions`), so these figures read the store and never refit: the
maps drawn are the ones whose numbers are in the tables. A task is a data set (and
classifier); its methods are the stored cells of the experiment on it.
"""

from __future__ import annotations

from calbench.plots.output import save_figure  # first: the headless backend  # isort: skip

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from tqdm import tqdm

from calbench.errors import CalbenchError
from calbench.plots.ks import ks_curves
from calbench.plots.reliability import (
    figure_legend,
    reliability_diagram,
    smooth_reliability_diagram,
)
from calbench.plots.simplex import calibration_data, calibration_map, colour_key
from calbench.results.predictions import FoldPredictions
from calbench.results.store import ResultStore
from calbench.runner.plan import load_configured_dataset
from calbench.simplex import map_points

#: Shown first in reliability and KS figures where the experiment has them (Valk Fig. 2);
#: the task's other methods fill up to four panels.
RELIABILITY_METHODS = ("uncal", "ts", "dir", "kernel_dir_h01")
#: Methods whose panel a simplex map figure draws otherwise (the data and the true map).
_NOT_A_MAP = ("uncal", "true_map")


@dataclass
class Task:
    """A data set (and classifier) of an experiment, with each method's stored folds."""

    dataset: str
    classifier: str
    folds: dict[str, list[FoldPredictions]]  # method -> its cell's folds
    config_hash: str  # one of its cells, for the data set's config

    @property
    def label(self) -> str:
        return self.dataset if self.classifier == "none" else f"{self.dataset} x {self.classifier}"

    def class_names(self, store: ResultStore) -> list[str] | None:
        """The data set's class names where it has them (a user's npz with
        ``class_names``, the UCI sets), read from its stored config; None where it has none
        or its files are no longer where the config says."""
        try:
            return load_configured_dataset(store.config(self.config_hash)["dataset"]).class_names
        except (CalbenchError, KeyError, OSError):
            return None

    def pooled(self, method: str) -> tuple[np.ndarray, np.ndarray]:
        """A method's test predictions and labels over all its folds."""
        folds = self.folds[method]
        return np.vstack([f.probs for f in folds]), np.concatenate([f.y for f in folds])

    def fold_sizes(self, method: str) -> list[int]:
        """How many of `pooled`'s rows each fold gives, in order."""
        return [len(f.y) for f in self.folds[method]]

    def measures(self, store: ResultStore | None) -> dict:
        """`table_measures` of the task's stored metric set (its config); the defaults'
        where there is no store or no config."""
        try:
            return table_measures(store.config(self.config_hash).get("metrics"))
        except (AttributeError, CalbenchError, KeyError, OSError):
            return table_measures(None)


def table_measures(metrics: dict | None) -> dict:
    """How a task's figures draw the numbers its tables print, from its metric set
    (``metrics``: output name -> options, as a cell's config holds them; None: the default
    set's): ``n_bins``, the reliability diagrams' equal-width bins (the stored
    ``confidence_ece``'s, so that the confidence panel's ECE is that table's number);
    ``ece_name``, ``confidence_ece``, or ``ECE`` where the stored one bins otherwise (it is
    then not the table's); ``ks``, the stored ``ks_error``'s score (mode, r)."""
    ece = dict((metrics or {}).get("confidence_ece") or {})
    ks = dict((metrics or {}).get("ks_error") or {})
    equal_width = ece.get("binning", "equal_width") == "equal_width" and ece.get("alpha", 1) == 1
    # A metric set without confidence_ece (Gupta's prints confidence_ece_25): no table
    # prints the panel's number under that name.
    tabled = equal_width and (metrics is None or "confidence_ece" in metrics)
    return {
        "n_bins": int(ece.get("n_bins", 15)) if equal_width else 15,
        "ece_name": "confidence_ece" if tabled else "ECE",
        "ks": {"mode": ks.get("mode", "top"), "r": ks.get("r", 1)},
    }


def stored_tasks(
    store: ResultStore, rows: pd.DataFrame, methods=None, order=(), limit=None
) -> tuple[list[Task], int]:
    """The first ``limit`` tasks of ``rows`` (one experiment's latest cells) with their
    predictions, and how many tasks there are; only the drawn tasks' files are read. Cells
    stored without predictions are left out. Methods come in ``order``'s order, then as
    stored."""
    cells = rows.drop_duplicates("config_hash")
    cells = cells[cells["predictions_sha256"] != ""]
    if methods:
        cells = cells[cells["method"].isin(methods)]
    rank = {m: i for i, m in enumerate(order)}
    cells = cells.assign(rank=cells["method"].map(lambda m: rank.get(m, len(rank))))
    # Each method's cells in the order of their setting (seeds and all else but the
    # method's), so that its first cell, which the simplex maps draw, shares the data of the
    # others' and of the task's config (`Task.config_hash`).
    by = ["rank", "setting"] if "setting" in cells else ["rank"]
    groups = list(cells.sort_values(by, kind="stable").groupby(["dataset", "classifier"]))
    drawn = groups[:limit]
    progress = tqdm(
        total=sum(len(g) for _, g in drawn),
        desc="reading stored predictions",
        unit="cell",
        leave=False,
    )
    tasks = []
    for (dataset, classifier), group in drawn:
        folds, drawn_as = {}, {}
        for cell in group.itertuples():
            # A method's cells over seeds are pooled, fold by fold, as the tables average
            # them (its first seed's alone once put seed 4's ECE beside seed 0's and 1's);
            # over criteria or losses, the first drawn only (the tables' other rows).
            kind = tuple(getattr(cell, c, "") for c in ("criterion", "loss", "shift"))
            if drawn_as.setdefault(cell.method, kind) == kind:
                stored = store.predictions(cell.config_hash, cell.predictions_sha256)
                folds.setdefault(cell.method, []).extend(stored)
            progress.update()
        tasks.append(Task(dataset, classifier, folds, group["config_hash"].iat[0]))
    progress.close()
    return tasks, len(groups)


def _file_stem(experiment: str, task: Task, several: bool) -> str:
    if not several:
        return experiment
    return f"{experiment}_{task.label.replace(' x ', '_')}"


def simplex_figure(store, experiment, task: Task, out_dir, formats, stem) -> list[Path]:
    """Valk Fig. 5: the calibration data, the true map where known, each method's map."""
    config = store.config(task.config_hash)
    dataset = load_configured_dataset(config["dataset"])
    panels = [m for m in task.folds if m not in _NOT_A_MAP]
    n = len(panels) + 1 + (dataset.true_map is not None)
    # A cell of the grid for the colour key: a full row of four panels left none, and the
    # key, drawn over the last panel, hid part of its map.
    cols = 5 if n % 4 == 0 else 4
    rows = -(-(n + 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows))
    axes = axes.ravel()
    names = dataset.class_names if len(dataset.class_names or []) == 3 else None
    calibration_data(
        axes[0], dataset.probs_cal, dataset.y_cal, f"(a) {task.label}: calibration data"
    )
    used = 1
    if dataset.true_map is not None:
        calibration_map(
            axes[1], dataset.true_map(map_points()), "(b) true calibration map", class_names=names
        )
        used = 2
    for i, method in enumerate(panels):
        folds = task.folds[method]
        note = f" (fold 1 of {len(folds)})" if len(folds) > 1 else ""
        title = f"({chr(ord('a') + used + i)}) {method}{note}"
        calibration_map(axes[used + i], folds[0].simplex, title, class_names=names)
    for ax in axes[n:]:
        ax.set_axis_off()
    colour_key(axes[n])
    _finish(
        fig,
        f"{experiment}: {task.label}, each method's calibration map on the simplex "
        "(arrows: from p to the calibrated p)",
    )
    return save_figure(fig, out_dir, f"{stem}_simplex_maps", formats)


#: Panels of a reliability figure when the methods are not chosen (``--methods``).
DEFAULT_PANELS = 4


def reliability_methods(
    task: Task, chosen: bool = False, leaders=None
) -> tuple[list[str], list[str]]:
    """(drawn, left out): the methods of a task's reliability figures. Chosen methods
    (``--methods``) are all drawn, in the order named; otherwise ``leaders`` (the
    leaderboard's top methods, TS and uncalibrated: the same on every task), else Valk's
    (`RELIABILITY_METHODS`) first and the others up to `DEFAULT_PANELS`."""
    if chosen:
        return list(task.folds), []
    if leaders:
        shown = [m for m in leaders if m in task.folds]
        return shown, [m for m in task.folds if m not in shown]
    preferred = [m for m in RELIABILITY_METHODS if m in task.folds]
    ordered = preferred + [m for m in task.folds if m not in preferred]
    return ordered[:DEFAULT_PANELS], ordered[DEFAULT_PANELS:]


#: Methods per row of a figure: beyond five, panels wrap onto further rows (13 methods in
#: one row made 3-cm panels whose bin counts overlapped).
PANELS_PER_ROW = 5


def _method_panels(n_methods: int, rows_per_method: int, height: float):
    """A figure whose methods wrap onto rows of at most `PANELS_PER_ROW`, each method a
    column of ``rows_per_method`` panels: (figure, each method's axes, top to bottom)."""
    cols = min(n_methods, PANELS_PER_ROW)
    blocks = -(-n_methods // cols)
    fig, axes = plt.subplots(
        blocks * rows_per_method,
        cols,
        figsize=(3.0 * cols, height * blocks * rows_per_method),
        squeeze=False,
    )
    per_method = []
    for j in range(n_methods):
        block, col = divmod(j, cols)
        top = block * rows_per_method
        per_method.append([axes[top + r, col] for r in range(rows_per_method)])
    for j in range(n_methods, blocks * cols):  # the last row's empty places
        block, col = divmod(j, cols)
        for r in range(rows_per_method):
            axes[block * rows_per_method + r, col].set_axis_off()
    return fig, per_method


#: Room for the legend below a figure's panels and for its title above them, in inches.
_LEGEND_ROOM = 0.3
_TITLE_ROOM = 0.35


def _finish(fig, title: str, legend_from=None) -> None:
    """The task as the figure's title; ``legend_from``'s legend below the panels, where it
    covers none."""
    fig.suptitle(title, fontsize=10)
    height = fig.get_figheight()
    bottom = 0.0 if legend_from is None else _LEGEND_ROOM / height
    fig.tight_layout(rect=(0, bottom, 1, 1 - _TITLE_ROOM / height))
    if legend_from is not None:
        figure_legend(fig, legend_from)


def class_label(first_class: str | None) -> str:
    """How the class panels name the first class: ``class 1``, with the data set's own name
    for it beside where it has another (``class 1 (cat)``; not ``class 1 (class 1)``)."""
    if first_class is None or first_class == "class 1":
        return "class 1"
    return f"class 1 ({first_class})"


def reliability_figures(
    experiment,
    task: Task,
    out_dir,
    formats,
    stem,
    bands=None,
    shown=None,
    first_class=None,
    measures=None,
) -> list[Path]:
    """Confidence and class-1 reliability diagrams (with ``bands``, a `BootstrapSettings`:
    each bar's bootstrap interval; ``first_class``: that class's name), smoothed reliability
    diagrams and KS graphs of the ``shown`` methods (default: `reliability_methods`), at
    most `PANELS_PER_ROW` a row. ``measures`` (`table_measures`; default: the default
    metric set's): the bins and KS score of the task's tables, so that the figures' ECE and
    KS error are the numbers the tables print."""
    shown = shown or reliability_methods(task)[0]
    measures = measures or table_measures(None)
    pooled = {m: (*task.pooled(m), task.fold_sizes(m)) for m in shown}  # stacked once
    title = f"{experiment}: {task.label}"
    fig = _binned_figure(pooled, title, bands, first_class, measures)
    paths = save_figure(fig, out_dir, f"{stem}_reliability", formats)
    fig, panels = _method_panels(len(shown), 1, 3.4)
    for method, (ax,) in zip(shown, panels, strict=True):
        smooth_reliability_diagram(ax, *pooled[method][:2], title=method, legend=False)
    _finish(fig, f"{title}: smoothed reliability diagrams (Błasiok and Nakkiran)", panels[0][0])
    paths += save_figure(fig, out_dir, f"{stem}_smooth_reliability", formats)
    fig, panels = _method_panels(len(shown), 2, 3.0)
    for method, (top, bottom) in zip(shown, panels, strict=True):
        probs, y, sizes = pooled[method]
        ks_curves(top, bottom, probs, y, method, **measures["ks"], fold_sizes=sizes)
    _finish(fig, f"{title}: KS calibration graphs of the top-1 score (Gupta et al. Fig. 1)")
    return paths + save_figure(fig, out_dir, f"{stem}_ks_curves", formats)


def _binned_figure(pooled: dict, title, bands, first_class, measures):
    """The figure of each method's confidence (above) and class-1 (below) binned
    reliability diagrams (``pooled``: method -> its folds' probabilities, labels, sizes)."""
    named = class_label(first_class)
    n_bins = measures["n_bins"]
    fig, panels = _method_panels(len(pooled), 2, 3.3)
    for (method, (probs, y, sizes)), axes in zip(pooled.items(), panels, strict=True):
        for ax, (index, what) in zip(axes, [(None, "confidence"), (0, named)], strict=True):
            reliability_diagram(
                ax,
                probs,
                y,
                n_bins=n_bins,
                class_index=index,
                title=f"{method}: {what}",
                bands=bands,
                legend=False,
                class_name=first_class,
                fold_sizes=sizes,
                ece_name=measures["ece_name"],
            )
    _finish(
        fig,
        f"{title}: reliability diagrams, {n_bins} equal-width bins (each method: the "
        f"confidence above, {named} below)",
        panels[0][0],
    )
    return fig


def task_figures(
    store, experiment, tasks: list[Task], out_dir, formats, bands=None, chosen=False, leaders=None
) -> list[Path]:
    """Each task's figures (file names carry the task where there are several); says which
    methods the reliability figures leave out (``chosen``: the user named them, all drawn)."""
    paths = []
    for task in tasks:
        stem = _file_stem(experiment, task, len(tasks) > 1)
        first = next(iter(task.folds.values()))[0]
        if first.simplex is not None and any(m not in _NOT_A_MAP for m in task.folds):
            paths += simplex_figure(store, experiment, task, out_dir, formats, stem)
        shown, left_out = reliability_methods(task, chosen, leaders)
        if left_out and not leaders:  # the leaders are said once, for every task
            print(
                f"reliability figures of {task.label}: {len(shown)} of "
                f"{len(shown) + len(left_out)} methods ({', '.join(shown)}); left out: "
                f"{', '.join(left_out)} (--methods names the ones to draw, any number)"
            )
        names = task.class_names(store)
        first_class = names[0] if names else None
        paths += reliability_figures(
            experiment, task, out_dir, formats, stem, bands, shown, first_class,
            task.measures(store),
        )  # fmt: skip
    return paths
