"""Metrics on every bootstrap resample of a fold at once (each record's
`calbench.metrics.MetricSpec.resampled`), for the metrics
that are no mean of per-sample terms: KS error, binned ECEs (confidence and classwise, every
binning) and MCE, Valk's average loss gap, the confidence variance.

A chunk of resamples is held as its draw counts, an (m, n) matrix: how often each test
point is drawn by each resample. A fixed bin (equal-width, Kull's digitize) keeps its
points, so a resample's bin sums are the counts times a sparse point-by-bin matrix, for
every class's bins in one product. An equal-size bin moves with the resample: its points
are the scores sorted, cut at fixed positions; a resample sorted by score is the test set
sorted once with each point repeated as often as it is drawn, so the sum up to a cut is a
cumulative sum read where the cumulative count reaches the cut. Copies of one point are
equal, so a point straddling a cut is split exactly; points with *equal scores* are ordered
by their index in the test set, where the metric on the resampled rows would order them by
their position in the resample (a tie-break, as arbitrary as the other; equal scores with
different outcomes straddling a cut are the only case where the two differ).

Each function returns None where its options are not covered; `calbench.stats.bootstrap`
checks its value on the fold itself against the metric before using it.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from calbench import numpy1_order
from calbench.metrics.bayes_risk import loss_gap_terms
from calbench.metrics.binned import EQUAL_SIZE, bin_indices, equal_size_order, top_label
from calbench.metrics.ks import ks_scores

#: Resamples handled at once: (chunk, n) arrays stay small.
_CHUNK = 64


def _chunks(indices):
    for start in range(0, len(indices), _CHUNK):
        yield indices[start : start + _CHUNK]


def _draw_counts(part: np.ndarray, n: int) -> np.ndarray:
    """(n + 1, m): how often each of the n points is drawn by each of the m resamples of
    the chunk, points along the first axis (gathering points in another order is then a
    gather of rows); row n is a point no resample draws, to pad with."""
    m = len(part)
    flat = (part * m + np.arange(m)[:, None]).ravel()
    counts = np.bincount(flat, minlength=(n + 1) * m).astype(np.float64)
    return counts.reshape(n + 1, m)


def _ks_replicates(fold, indices, mode="top", r=1):
    """Gupta's KS error on every resample at once: a resample sorted by score is its
    points' ranks sorted, so the scores are sorted once (as `ks_error` sorts them; a
    resample's equal scores keep that order)."""
    scores, outcomes = ks_scores(fold.probs, fold.y, mode, r)
    order = numpy1_order.argsort(scores)
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order))
    gap = scores[order] - np.asarray(outcomes, dtype=np.float64)[order]
    out = [
        np.abs(np.cumsum(gap[np.sort(rank[part], axis=1)], axis=1)).max(axis=1)
        for part in _chunks(indices)
    ]
    return np.concatenate(out) / indices.shape[1]


def _fixed_bins(scores, gaps, n_bins, binning):
    """(counts -> (bin counts, bin gap sums)), each (m, J, slots), for J scores (columns)
    whose points keep their bins under resampling."""
    n, columns = scores.shape
    bins = np.column_stack([bin_indices(scores[:, j], n_bins, binning) for j in range(columns)])
    slots = max(n_bins, int(bins.max()) + 1)  # digitize: a score of 1 has a bin of its own
    where = (bins + slots * np.arange(columns)).ravel()
    rows = np.repeat(np.arange(n), columns)
    shape = (n, columns * slots)
    member = sparse.csc_matrix((np.ones(n * columns), (rows, where)), shape=shape)
    weighted = sparse.csc_matrix((gaps.ravel(), (rows, where)), shape=shape)

    def sums(counts):
        counts = counts[:n]
        per_bin = (member.T @ counts).T, (weighted.T @ counts).T
        return tuple(np.asarray(a).reshape(counts.shape[1], columns, slots) for a in per_bin)

    return sums


def _equal_size_bins(scores, gaps, n_bins, binning):
    """As `_fixed_bins`, for bins of equal size: n_bins contiguous runs of the sorted
    scores (`numpy.array_split` sizes, which do not depend on the resample). A resample's
    equal scores keep the order the whole fold's sort gave them (`equal_size_order`), so
    the resample of every point once is the fold's own value."""
    n, columns = scores.shape
    sizes = np.array([len(c) for c in np.array_split(np.arange(n), n_bins)], dtype=np.float64)
    cuts = np.cumsum(sizes)
    blocks = -(-n // _BLOCK)
    # Each column's sorting, padded to whole blocks with point n (drawn by no resample).
    padding = np.full(blocks * _BLOCK - n, n)
    orders = [
        np.concatenate([equal_size_order(scores[:, j], binning), padding]) for j in range(columns)
    ]
    weights = np.vstack([gaps, np.zeros(columns)])

    def sums(counts):
        out = np.empty((counts.shape[1], columns, len(cuts)))
        for j, order in enumerate(orders):
            below = _sums_below_cuts(counts[order], weights[order, j], cuts)
            out[:, j] = np.diff(below, axis=1, prepend=0.0)
        return np.broadcast_to(sizes, out.shape), out

    return sums


#: Sorted points per block in `_sums_below_cuts`.
_BLOCK = 128


def _sums_below_cuts(drawn, weights, cuts):
    """(m, cuts): for each resample (column of ``drawn``, the sorted points' draw counts,
    in whole blocks) the sum of ``weights`` over its first c drawn copies, for each cut c.

    A cumulative sum over all n points per resample is the plain way, and numpy's is slow;
    block sums find the block where each cut falls, and only that block is summed up."""
    m = drawn.shape[1]
    rows = np.arange(m)[:, None]
    in_blocks = drawn.reshape(-1, _BLOCK, m)
    weighted = (drawn * weights[:, None]).reshape(-1, _BLOCK, m)
    reached = np.cumsum(in_blocks.sum(axis=1), axis=0).T  # (m, blocks)
    summed = np.cumsum(weighted.sum(axis=1), axis=0).T
    # The first block whose cumulative count reaches the cut; rows shifted apart so that
    # one searchsorted serves every resample.
    shift = (len(drawn) + 1) * rows
    block = np.searchsorted((reached + shift).ravel(), (cuts + shift).ravel()).reshape(m, -1)
    block -= reached.shape[1] * rows
    before = np.where(block > 0, reached[rows, block - 1], 0.0)
    sum_before = np.where(block > 0, summed[rows, block - 1], 0.0)
    # Within it, the first point whose cumulative count reaches the cut; the copies of it
    # beyond the cut are taken back. (Indexing (block, :, resample) gives (m, cuts, B).)
    inside = before[..., None] + np.cumsum(in_blocks[block, :, rows], axis=2)
    at = (inside < cuts[:, None]).sum(axis=2)[..., None]
    point = block[..., None] * _BLOCK + at
    taken = np.cumsum(weighted[block, :, rows], axis=2)
    over = np.take_along_axis(inside, at, axis=2) - cuts[:, None]
    value = sum_before[..., None] + np.take_along_axis(taken, at, axis=2)
    return (value - over * weights[point])[..., 0]


def _binned_replicates(pairs, statistic):
    """A binned error on every resample at once; ``pairs`` gives a fold's (scores,
    outcomes) as (n, J) columns, the error of each column is ``statistic`` of its bins'
    counts and mean gaps, and the columns' errors are averaged (or summed)."""

    def replicates(fold, indices, n_bins=15, binning="equal_width", alpha=1, reduction="mean"):
        scores, outcomes = pairs(fold)
        gaps = outcomes - scores
        if binning in EQUAL_SIZE:
            sums = _equal_size_bins(scores, gaps, n_bins, binning)
        else:
            sums = _fixed_bins(scores, gaps, n_bins, binning)
        out = []
        for part in _chunks(indices):
            counts, gap = sums(_draw_counts(part, len(fold.y)))
            with np.errstate(invalid="ignore", divide="ignore"):
                mean_gap = np.abs(gap / counts)
            per_column = statistic(counts, mean_gap, alpha)
            out.append(per_column.sum(axis=1) if reduction == "sum" else per_column.mean(axis=1))
        return np.concatenate(out)

    return replicates


def _ece(counts, mean_gap, alpha):
    weighted = np.where(counts > 0, counts * np.nan_to_num(mean_gap) ** alpha, 0.0)
    return (weighted.sum(axis=-1) / counts.sum(axis=-1)) ** (1.0 / alpha)


def _mce(counts, mean_gap, alpha):  # noqa: ARG001 (MCE has no order)
    return np.where(counts > 0, mean_gap, -np.inf).max(axis=-1)


def _confidence(fold):
    scores, outcomes = top_label(fold.probs, fold.y)
    return scores[:, None], outcomes[:, None]


def _classwise(fold):
    k = fold.probs.shape[1]
    return fold.probs, (fold.y[:, None] == np.arange(k)).astype(np.float64)


def _loss_gap_replicates(fold, indices, **options):
    """Valk's average loss gap on every resample: each loss's gap is the absolute mean of
    per-sample terms, so a resample's gaps are its counts times the terms (one matrix
    product per chunk of resamples)."""
    terms = loss_gap_terms(fold.probs, fold.y, true_probs=fold.true_probs, **options)
    n = indices.shape[1]
    out = [
        np.abs(_draw_counts(part, n)[:n].T @ terms / n).mean(axis=1) for part in _chunks(indices)
    ]
    return np.concatenate(out)


#: Each metric's value on every resample of a fold at once, ``f(fold, indices, **options)``
#: (options a metric does not take are refused by the metric itself, in the check on the fold
#: before use); `calbench.metrics.LIBRARY_METRICS` points each record at its own.
ks_error_replicates = _ks_replicates
confidence_ece_replicates = _binned_replicates(_confidence, _ece)
classwise_ece_replicates = _binned_replicates(_classwise, _ece)
mce_replicates = _binned_replicates(_confidence, _mce)
average_loss_gap_replicates = _loss_gap_replicates


def confidence_variance_replicates(fold, indices):
    return fold.probs.max(axis=1)[indices].var(axis=1)


#: Metrics with no form above, recomputed whole on each resample (`calbench.stats.bootstrap`
#: falls back to it): estimators that are neither means of per-sample terms nor sums over
#: bins of the drawn rows. A metric added to `calbench.metrics.METRICS` must be declared
#: here, by a record's ``resampled`` or ``terms``, or in the bootstrap's ``NOT_RESAMPLED``
#: (tests/stats/test_bootstrap.py), so its author decides how it resamples.
RECOMPUTED = (
    "brier_reliability",
    "brier_resolution",
    "brier_uncertainty",
    "brier_within_bins",
    "calibration_brier",
    "calibration_log_loss",
    "classwise_ece_p_value",
    "confidence_ece_p_value",
    "confidence_ece_sweep",
    "debiased_ece",
    "kde_ece",
    "kuiper_error",
    "l2_ece_squared",
    "lp_calibration_error",
    "overconfidence_error",
    "refinement_brier",
    "refinement_log_loss",
    "skce",
    "skce_p_value",
    "smooth_ece",
    "true_classwise_ce",
    "underconfidence_error",
)


def recomputed_whole(fold, indices, **options):
    """A metric record's ``resampled`` that declares it recomputed whole on each resample:
    what `RECOMPUTED` says for the library's metrics, for a paper pack's metric (which the
    library does not name)."""
    return None


def binned_frequencies(scores, outcomes, indices, n_bins, binning="equal_width"):
    """(B, bins): each resample's mean outcome in each fixed bin of ``scores`` (NaN where
    the resample leaves it empty): the spread of a reliability diagram's bars."""
    scores, outcomes = np.asarray(scores, dtype=np.float64), np.asarray(outcomes, np.float64)
    sums = _fixed_bins(scores[:, None], outcomes[:, None], n_bins, binning)
    out = []
    for part in _chunks(indices):
        counts, hits = sums(_draw_counts(part, len(scores)))
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append((hits / counts)[:, 0, :n_bins])
    return np.concatenate(out)


def binned_ece_replicates(scores, outcomes, indices, n_bins, binning="equal_width"):
    """(B,): each resample's ECE of ``scores`` against ``outcomes`` in the fold's fixed
    bins: the interval a reliability diagram prints beside its ECE."""
    scores, outcomes = np.asarray(scores, dtype=np.float64), np.asarray(outcomes, np.float64)
    sums = _fixed_bins(scores[:, None], (outcomes - scores)[:, None], n_bins, binning)
    out = []
    for part in _chunks(indices):
        counts, gap = sums(_draw_counts(part, len(scores)))
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(_ece(counts, np.abs(gap / counts), 1)[:, 0])
    return np.concatenate(out)
