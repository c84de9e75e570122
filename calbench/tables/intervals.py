"""Intervals and paired marks for a ranked table (``calbench tables --ci``).

Each value whose layout names its source (`RankedTable.sources`: a metric of stored cells)
gets the bootstrap interval of the fold mean (`calbench.stats.bootstrap`), from the stored
test predictions. Within a row, every ranked method is compared with the row's best on the
same resamples (methods on the same test points are resampled alike): where the interval of
their difference holds 0, the method is marked as not distinguishable from the best, which
is what the papers' bold face would mean if it were tested. A value drawn from several cells
(seeds of a procedure) takes the mean of their replicates.
"""

from __future__ import annotations

import math

import numpy as np

from calbench.stats.bootstrap import BootstrapSettings, interval, stored_bootstrap
from calbench.tables.layouts import RankedTable


class Replicates:
    """Bootstraps of the store's cells, drawn once per cell and metric set."""

    def __init__(self, store, checksums: dict[str, str], settings: BootstrapSettings):
        self.store, self.checksums, self.settings = store, checksums, settings

    def of(self, source):
        """(estimate, replicates, jackknife) of a table value's source, at its scale."""
        metric, hashes, scale = source
        boots = [
            stored_bootstrap(self.store, h, self.checksums[h], [metric], self.settings)
            for h in hashes
        ]
        estimate = scale * np.mean([b.estimate[metric] for b in boots])
        replicates = scale * np.mean([b.replicates[metric] for b in boots], axis=0)
        jackknife = boots[0].jackknife[metric] if len(boots) == 1 else None
        if jackknife is not None:
            jackknife = [scale * part for part in jackknife]
        return estimate, replicates, jackknife


def _row_intervals(table: RankedTable, i: int, row, draws, settings) -> None:
    """Row ``i``'s intervals, and which of its values the paired bootstrap cannot tell from
    the row's best."""
    replicates = {}
    for j, source in enumerate(row):
        if source is None:
            continue
        estimate, replicates[j], jackknife = draws.of(source)
        # BCa needs the jackknife of a mean of per-sample terms; the others fall back.
        bca_impossible = settings.method == "bca" and jackknife is None
        method = "percentile" if bca_impossible else settings.method
        table.lower[i, j], table.upper[i, j] = interval(
            replicates[j], estimate, settings.alpha, method, jackknife
        )
    best = [j for j in replicates if table.ranks[i, j] == 1]
    if not best:
        return
    for j in replicates:
        if j == best[0] or math.isnan(table.ranks[i, j]):
            continue
        difference = replicates[j] - replicates[best[0]]
        low, high = np.quantile(difference, [settings.alpha / 2, 1 - settings.alpha / 2])
        table.tied_with_best[i, j] = low <= 0 <= high


#: Names of calibration-error estimates, whose bootstrap interval the metric_truth study
#: found to miss the population error (they are biased; the interval is their spread).
_ESTIMATE_NAMES = ("ece", "ks_error", "kuiper", "mce")


def _calibration_errors(table: RankedTable) -> bool:
    """Whether any value with an interval is a calibration-error estimate."""
    names = {s[0] for row in table.sources for s in row if s is not None}
    return any(
        part in name and "p_value" not in name and "accepted" not in name
        for name in names
        for part in _ESTIMATE_NAMES
    )


def add_intervals(
    table: RankedTable, store, checksums: dict[str, str], settings: BootstrapSettings
) -> RankedTable:
    """``table`` with `RankedTable.lower`, ``upper`` and ``tied_with_best`` filled where
    its values have sources (``checksums``: each stored cell's predictions checksum)."""
    shape = table.values.shape
    table.lower, table.upper = np.full(shape, np.nan), np.full(shape, np.nan)
    table.tied_with_best = np.zeros(shape, dtype=bool)
    if table.sources is None:
        table.interval_note = (
            "No intervals: this layout's values are not metrics of cells (each task's values "
            "with intervals are in the generic tables, EXPERIMENT_METRIC)."
        )
        return table
    draws = Replicates(store, checksums, settings)
    level = f"{100 * (1 - settings.alpha):g}%"
    for i, row in enumerate(table.sources):
        _row_intervals(table, i, row, draws, settings)
    bca = " (BCa for means of per-sample terms, e.g. log-loss; percentile for the others)"
    table.interval_note = (
        f"Brackets: {settings.describe()}{bca if settings.method == 'bca' else ''}; "
        "† not distinguishable from the row's best "
        f"(paired bootstrap of the difference, {level} percentile interval holds 0)."
    )
    bare = sum(
        1
        for i, row in enumerate(table.sources)
        for j, source in enumerate(row)
        if source is not None and math.isnan(table.lower[i, j])
    )
    if bare:
        table.interval_note += (
            f" {bare} value(s) have no interval: Kull's calibration tests (p_*) are decisions "
            "drawn from resamples of their own."
        )
    if _calibration_errors(table):
        table.interval_note += (
            " An interval of a calibration-error estimate is its spread over test sets, not an "
            "interval for the model's calibration error: where the truth is known, 95% "
            "intervals of binned ECEs and KS held it on 1% to 81% of test sets "
            "(`calbench metric-truth`; docs: Which metric to trust)."
        )
    outside = int(((table.values < table.lower) | (table.values > table.upper)).sum())
    if outside:
        # A binned error is a sum of absolute gaps: resampling adds noise to every gap and
        # so raises it, and the percentile interval can miss the estimate altogether.
        table.interval_note += (
            f" {outside} value(s) lie outside their own interval: a binned or KS error "
            "grows under resampling (its gaps gather noise), so its percentile interval "
            "lies above the estimate; `--interval recentred` centres it on the estimate."
        )
    return table
