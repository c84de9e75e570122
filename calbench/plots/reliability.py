"""Reliability diagrams (Kull Fig. 1; Valk Fig. 2): bars, gap bars, diagonal, bin counts;
and the smoothed one of Błasiok and Nakkiran (2024)."""

from __future__ import annotations

import warnings

import numpy as np
from matplotlib.collections import LineCollection

from calbench.metrics.binned import bin_statistics
from calbench.metrics.resampled import binned_ece_replicates, binned_frequencies
from calbench.metrics.smooth import smoothed_reliability
from calbench.stats.bootstrap import BootstrapSettings, fold_indices, interval


def reliability_diagram(
    ax,
    probs,
    y,
    n_bins=15,
    class_index=None,
    title="",
    bands=None,
    legend=True,
    class_name=None,
    fold_sizes=None,
    ece_name="confidence_ece",
):
    """Confidence reliability (``class_index=None``) or class-j reliability on ``ax``.

    Blue bars: observed frequency per equal-width bin; red bars: the gap from the mean
    predicted value to it, drawn at the mean prediction; dotted diagonal: calibration;
    numbers above the axis: samples per bin (the legend says so). The box top left: the
    ECE of these bins (`binned_ece`: with ``fold_sizes``, the rows being those folds' test
    rows one after another, the mean over the folds, as the tables print it), under
    ``ece_name`` for the confidence (the tables' name where they bin it so) and as the ECE
    of the class otherwise. ``bands`` (`BootstrapSettings`): each bar's bootstrap interval over
    resampled test sets as an error bar (stratified by label, as the tables' intervals).
    ``legend=False`` leaves the legend to the figure (`figure_legend`), below the panels,
    where it covers no bar.
    """
    scores, outcomes, ylabel = _scores_and_outcomes(probs, y, class_index, class_name)
    counts, mean_score, mean_outcome = bin_statistics(scores, outcomes, n_bins, "equal_width")
    centres = (np.arange(n_bins) + 0.5) / n_bins
    filled = counts > 0
    _draw_bars(ax, centres[filled], mean_score[filled], mean_outcome[filled], 1.0 / n_bins)
    if bands is not None:
        lower, upper = _frequency_band(scores, outcomes, y, n_bins, bands)
        ax.errorbar(
            centres[filled],
            mean_outcome[filled],
            yerr=[mean_outcome[filled] - lower[filled], upper[filled] - mean_outcome[filled]],
            fmt="none",
            ecolor="black",
            elinewidth=0.8,
            capsize=2,
            label=f"{100 * (1 - bands.alpha):g}% bootstrap",
        )
    ax.plot([0, 1], [0, 1], ":", color="black", linewidth=1)
    settings = bands or BootstrapSettings()
    ece = binned_ece(scores, outcomes, y, n_bins, settings, fold_sizes)
    _draw_ece(ax, ece, settings, _ece_name(class_index, class_name, ece_name), n_bins, fold_sizes)
    for c, n in zip(centres[filled], counts[filled], strict=True):
        ax.text(c, 1.01, f"{int(n)}", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(_score_label(class_index, class_name))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9, pad=30)
    ax.plot([], [], " ", label="top: n per bin")
    if legend:
        ax.legend(loc="upper left", fontsize=7)
    return ax


def _ece_name(class_index, class_name, ece_name) -> str:
    """The panel's ECE: ``ece_name`` for the confidence's, or the ECE of one class (no
    table has it alone)."""
    if class_index is None:
        return ece_name
    return f"ECE of {class_name or f'class {class_index + 1}'}"


def _score_label(class_index, class_name) -> str:
    if class_index is None:
        return "confidence"
    return f"predicted p({class_name})" if class_name else f"predicted p{class_index + 1}"


def _scores_and_outcomes(probs, y, class_index, class_name):
    """(score, outcome) per row and the y-axis label: the confidence and whether the top
    class is right, or class j's probability and whether the label is j."""
    probs = np.asarray(probs)
    if class_index is None:
        return probs.max(axis=1), (probs.argmax(axis=1) == y).astype(float), "accuracy"
    outcomes = (np.asarray(y) == class_index).astype(float)
    ylabel = f"frequency of {class_name or f'class {class_index + 1}'}"
    return probs[:, class_index], outcomes, ylabel


def _draw_bars(ax, centres, mean_score, mean_outcome, width) -> None:
    """The filled bins' observed frequencies (blue) and their gaps to the mean prediction
    (red, drawn at the mean prediction)."""
    ax.bar(
        centres,
        mean_outcome,
        width=width,
        color="#4878d0",
        edgecolor="black",
        linewidth=0.5,
        label="observed",
    )
    ax.bar(
        mean_score,
        mean_score - mean_outcome,
        bottom=mean_outcome,
        width=width * 0.3,
        color="#d65f5f",
        alpha=0.9,
        label="gap",
    )


def _draw_ece(ax, ece_interval, settings, name, n_bins, fold_sizes) -> None:
    """The binned ECE, what it is (its name, its bins, a fold mean or not) and its
    recentred bootstrap interval, top left."""
    ece, low, high = ece_interval
    folds = len(fold_sizes or [1])
    how = f"{n_bins} equal-width bins" + (f", mean of {folds} folds" if folds > 1 else "")
    ax.text(
        0.03,
        0.97,
        f"{name} {ece:.4f}\n{how}\n"
        f"{100 * (1 - settings.alpha):g}% [{low:.4f}, {high:.4f}] (recentred)",
        transform=ax.transAxes,
        va="top",
        fontsize=7,
        bbox={"facecolor": "white", "edgecolor": "#999999", "linewidth": 0.5, "pad": 2},
    )


def figure_legend(fig, ax) -> None:
    """One legend for a figure of like panels (``ax``'s entries), below them all."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)


def binned_ece(scores, outcomes, y, n_bins, settings, fold_sizes=None):
    """(ECE, lower, upper): the equal-width binned ECE of (score, outcome) pairs, computed
    as `calbench.metrics.confidence_ece` computes it, and its interval over the tables'
    resampled test sets (`fold_indices`, stratified by label), recentred on the estimate:
    a binned error grows under resampling, so the plain percentile interval can lie wholly
    above the ECE it belongs to (`calbench.stats.bootstrap.INTERVALS`). With
    ``fold_sizes`` (the rows: those folds' test rows one after another) the statistic is
    the mean of the folds' ECEs, each fold resampled on its own, as
    `calbench.stats.bootstrap.bootstrap_cell` draws the tables' values and intervals."""
    y = np.asarray(y)
    bounds = np.cumsum([0, *(fold_sizes or [len(scores)])])
    values, replicates = [], []
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        part = slice(start, stop)
        counts, mean_score, mean_outcome = bin_statistics(
            scores[part], outcomes[part], n_bins, "equal_width"
        )
        filled = counts > 0
        gaps = np.abs(mean_outcome[filled] - mean_score[filled])
        values.append(float(counts[filled] / (stop - start) @ gaps))  # as confidence_ece
        drawn = fold_indices(y[part], settings.resamples, settings.seed, settings.stratify)
        replicates.append(binned_ece_replicates(scores[part], outcomes[part], drawn, n_bins))
    ece = float(np.mean(values))
    low, high = interval(np.mean(replicates, axis=0), ece, settings.alpha, "recentred")
    return ece, low, high


def _frequency_band(scores, outcomes, y, n_bins, settings):
    """Per bin, the percentile interval of its observed frequency over resampled test sets
    (a bin a resample leaves empty does not count towards it)."""
    # The same draws as the tables' intervals: once per labels, shared by every panel.
    drawn = fold_indices(np.asarray(y), settings.resamples, settings.seed, settings.stratify)
    frequencies = binned_frequencies(scores, outcomes, drawn, n_bins)
    levels = [settings.alpha / 2, 1 - settings.alpha / 2]
    with warnings.catch_warnings():  # a bin no resample fills: NaN, drawn without a bar
        warnings.simplefilter("ignore", RuntimeWarning)
        lower, upper = np.nanquantile(frequencies, levels, axis=0)
    return lower, upper


#: Points at which the smoothed curve is evaluated over [0, 1] (relplot draws 200; more
#: here so that the part drawn, within the observed confidences, keeps its detail).
SMOOTH_MESH = 1001
#: The kernel's summed weight below which the smoothed accuracy is not drawn: there the
#: 1e-4 floor relplot adds to the density (`calbench.metrics.smooth`) moves it by over 1%.
NEGLIGIBLE_WEIGHT = 1e-2


def smoothed_line(probs, y, bandwidth=None) -> dict:
    """`smoothed_reliability`'s curve restricted to where data says something: ``t`` and
    ``accuracy`` only between the smallest and the largest observed confidence (ends
    included, interpolated), and only where the kernel's summed weight is at least
    `NEGLIGIBLE_WEIGHT` (NaN elsewhere, a break in the line). Outside the observed range the
    kernel average is an extrapolation: it is the outcome of the one or two outermost rows
    (an accuracy of 0.8 at a confidence of 0.15 on 4 classes, where no confidence can be
    below 1/4), then the floor pulls it to 0. Top-label confidences are at least 1/k, so
    the line never starts below 1/k. smECE itself (``smooth_ece``) is unchanged."""
    probs = np.asarray(probs)
    curve = smoothed_reliability(probs, y, bandwidth, points=SMOOTH_MESH)
    mesh, confidence = curve["mesh"], probs.max(axis=1)
    low, high = confidence.min(), confidence.max()
    inside = (mesh > low) & (mesh < high)
    t = np.concatenate([[low], mesh[inside], [high]])
    accuracy = np.interp(t, mesh, curve["accuracy"])
    weight = np.interp(t, mesh, curve["density"]) * len(confidence)  # sum_i K(t, f_i)
    accuracy[weight < NEGLIGIBLE_WEIGHT] = np.nan
    return {**curve, "t": t, "line": accuracy, "line_density": weight / len(confidence)}


def smooth_reliability_diagram(ax, probs, y, title="", legend=True):
    """Błasiok and Nakkiran's smoothed reliability diagram of the confidence on ``ax``: the
    kernel-smoothed accuracy against the confidence (`smoothed_line`: relplot's line,
    as wide as the density there, drawn only over the observed confidences), the diagonal,
    the confidences' density shaded along the bottom and the confidences no top label can
    have (below 1/k) hatched; the title carries smooth ECE and the bandwidth."""
    probs = np.asarray(probs)
    curve = smoothed_line(probs, y)
    mesh, density = curve["mesh"], curve["density"]
    floor = 1.0 / probs.shape[1]
    peak = max(density.max(), 1e-12)
    possible = mesh >= floor  # the kernel's tail below 1/k is no confidence either
    ax.fill_between(
        mesh[possible], 0, 0.25 * density[possible] / peak, color="#bbbbbb",
        label="density of confidences",
    )  # fmt: skip
    ax.axvspan(
        0, floor, facecolor="#f4f4f4", hatch="//", edgecolor="#cccccc", linewidth=0,
        label=f"confidence < 1/k (k={probs.shape[1]}): none",
    )  # fmt: skip
    ax.plot([0, 1], [0, 1], ":", color="black", linewidth=1)
    # As relplot draws it: the line's width follows the density, so stretches with few
    # confidences there (where the ratio of two small sums swings) fade out.
    points = np.column_stack([curve["t"], curve["line"]])
    segments = np.stack([points[:-1], points[1:]], axis=1)
    drawn = ~np.isnan(segments).any(axis=(1, 2))
    widths = 0.3 + 2.7 * np.sqrt(curve["line_density"][:-1] / peak)
    ax.add_collection(LineCollection(segments[drawn], linewidths=widths[drawn], colors="#d65f5f"))
    ax.plot([], [], color="#d65f5f", linewidth=2, label="smoothed accuracy (observed range)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.set_title(
        f"{title}\nsmECE {curve['smooth_ece']:.4f} (sigma {curve['sigma']:.3f})", fontsize=9
    )
    if legend:
        ax.legend(loc="upper left", fontsize=7)
    return ax
