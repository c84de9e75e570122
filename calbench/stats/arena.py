"""Statistics of a leaderboard over many tasks: win rates, Bradley-Terry strengths and their
bootstrap over blocks of tasks (CalArena 2026, whose definitions these follow; written here).

On a task, method i *beats* method j when its value is strictly better (ties beat nobody).
Its **win rate** on the task is the share of the other k - 1 methods it beats; its win rate
over tasks is the mean of those. A *clear* win also needs the paired per-task test to tell
the two apart (the bootstrap interval of their difference on the task's test points holds
no 0): a win within the noise of the test set is shown apart, not counted.

**Bradley-Terry** strengths θ maximise :math:`\\sum_{i \\ne j} W_{ij} \\log \\sigma(θ_i - θ_j)`
over the pairwise outcomes of every task (:math:`W_{ij}`: tasks where i beats j, plus half
the ties), with a weak Gaussian prior (variance 100 on each θ) that keeps an undefeated
method finite, centred at mean 0 and shown on the Elo scale: 1000 + 400 θ / ln 10.

Intervals resample **blocks** of tasks with replacement (tasks sharing a data set, e.g. the
11 classifiers of one UCI set, move together), CalArena's block bootstrap: a resample's win
rate is its total wins over its total tasks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

ELO_SCALE = 400 / np.log(10)
ELO_BASE = 1000.0
#: Variance of the Gaussian prior on each strength (natural units).
PRIOR_VARIANCE = 100.0


def beats(values: np.ndarray, higher_is_better: bool = False) -> np.ndarray:
    """(tasks, k, k) booleans: on task t, method i's value is strictly better than j's."""
    v = np.asarray(values, dtype=float)
    if higher_is_better:
        v = -v
    return v[:, :, None] < v[:, None, :]


def win_rates(wins: np.ndarray) -> np.ndarray:
    """(tasks, k): per task, the share of the other methods each method beats."""
    k = wins.shape[1]
    return wins.sum(axis=2) / (k - 1)


def games(wins: np.ndarray) -> np.ndarray:
    """(tasks, k, k) Bradley-Terry outcomes: 1 where i beats j on the task, 1/2 where they
    tie, 0 where j wins (and on the diagonal)."""
    k = wins.shape[1]
    ties = ~wins & ~np.swapaxes(wins, 1, 2) & ~np.eye(k, dtype=bool)
    return wins + 0.5 * ties


def pairwise_wins(wins: np.ndarray) -> np.ndarray:
    """(k, k) Bradley-Terry counts over tasks: i's wins over j plus half their ties."""
    return games(wins).sum(axis=0)


def bradley_terry(counts: np.ndarray, iterations: int = 100) -> np.ndarray:
    """Strengths θ (mean 0, natural units) from (k, k) pairwise ``counts`` (see module), by
    Newton's method: the prior makes the objective strictly convex, so it converges in a few
    steps from 0."""
    counts = np.asarray(counts, dtype=float)
    k = len(counts)
    games = counts + counts.T
    theta = np.zeros(k)
    for _ in range(iterations):
        p = expit(theta[:, None] - theta[None, :])  # P(i beats j)
        # d/dθ_i of -Σ W_ij log σ(θ_i - θ_j) + |θ|²/2v
        gradient = (games * p).sum(axis=1) - counts.sum(axis=1) + theta / PRIOR_VARIANCE
        curvature = games * p * (1 - p)
        hessian = np.diag(curvature.sum(axis=1) + 1 / PRIOR_VARIANCE) - curvature
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return theta - theta.mean()


def elo(theta: np.ndarray) -> np.ndarray:
    return ELO_BASE + ELO_SCALE * np.asarray(theta)


def block_counts(blocks, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, n_blocks): how often each block is drawn in each resample (as many
    blocks drawn as there are), and the block of each task (``blocks``: a label per task)
    as the second return value, an index into the columns."""
    labels, index = np.unique(np.asarray(blocks, dtype=str), return_inverse=True)
    drawn = rng.integers(0, len(labels), (n_resamples, len(labels)))
    counts = np.zeros((n_resamples, len(labels)))
    np.add.at(counts, (np.arange(n_resamples)[:, None], drawn), 1)
    return counts, index


def block_sums(per_task: np.ndarray, index: np.ndarray, n_blocks: int) -> np.ndarray:
    """Sums of ``per_task`` (first axis: tasks) within each block."""
    sums = np.zeros((n_blocks, *per_task.shape[1:]))
    np.add.at(sums, index, per_task)
    return sums


def bootstrap_means(per_task: np.ndarray, counts: np.ndarray, index) -> np.ndarray:
    """(n_resamples, k): each resample's total over its total tasks (of per-task win
    rates, the win rates' bootstrap; of any per-task value, its mean's)."""
    sums = block_sums(per_task, index, counts.shape[1])
    sizes = np.bincount(index, minlength=counts.shape[1])
    return (counts @ sums) / (counts @ sizes)[:, None]


def bootstrap_strengths(wins: np.ndarray, counts: np.ndarray, index) -> np.ndarray:
    """(n_resamples, k): Bradley-Terry strengths refitted on each resample of blocks."""
    per_block = block_sums(games(wins), index, counts.shape[1])
    return np.stack([bradley_terry(np.tensordot(c, per_block, 1)) for c in counts])


def rank_sets(boot_rates: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(best, worst) rank each method takes in the central ``1 - alpha`` of the block
    bootstrap (``boot_rates``: resamples x methods win rates; rank 1 the highest rate, tied
    rates sharing the better rank): at 95% the method could be ranked anywhere from
    ``best`` to ``worst``, so the methods that could be first are those with ``best == 1``."""
    ranks = 1 + (boot_rates[:, None, :] > boot_rates[:, :, None]).sum(axis=2)
    low, high = np.percentile(ranks, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return np.floor(low).astype(int), np.ceil(high).astype(int)


def blocks_to_tell_apart(
    rate: np.ndarray, boot_rates: np.ndarray, n_blocks: int, leader: int, alpha: float = 0.05
) -> np.ndarray:
    """Per method, about how many blocks (data sets) a benchmark needs for the 95% interval
    of its win-rate gap to ``leader`` to exclude 0, at the gap observed: the interval's
    half-width shrinks as 1 / sqrt(blocks), so ``n_blocks (z se / gap)^2`` with ``se`` the
    bootstrap spread of the gap here. NaN for the leader; inf where the gap is 0. NaN for
    all from one block: every resample is that block, the spread is 0 and the formula said
    "0 blocks" where it can say nothing."""
    if n_blocks < 2:
        return np.full(len(rate), np.nan)
    gaps = rate[leader] - rate
    spread = (boot_rates[:, leader : leader + 1] - boot_rates).std(axis=0, ddof=1)
    z = norm.ppf(1 - alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = n_blocks * (z * spread / np.abs(gaps)) ** 2
    # A gap with no spread over the resamples (every block agrees) is told apart by any
    # one block: at least 1, never the "0" the formula gives.
    needed = np.where(np.isfinite(needed), np.maximum(needed, 1.0), needed)
    needed[leader] = np.nan
    return needed


def improvement_over_uncalibrated(
    values,
    blocks,
    higher_is_better: bool,
    factor: float = 100.0,
    resamples: int = 1000,
    seed: int = 0,
):
    """CalArena's improvement over the uncalibrated model (``compute_absolute_improvements``):
    per method, the mean over tasks of ``factor x (uncal - method)`` (``method - uncal`` for
    a score, so positive is better), with the margin ``1.96 sd / sqrt(N)``, ``sd`` the
    tasks' standard deviation and ``N`` the number of distinct data sets (``blocks``), as
    CalArena computes it; and calbench's 95% interval from the bootstrap over data sets
    beside it (the tasks of a data set resampled together). ``values``: tasks x methods,
    with ``uncal``."""
    if "uncal" not in values:
        raise ValueError("the improvement table needs the uncalibrated model's values.")
    sign = 1.0 if higher_is_better else -1.0
    gains = sign * (values.sub(values["uncal"], axis=0)) * factor
    gains = gains.drop(columns="uncal")
    margin = 1.96 * gains.std(ddof=1) / np.sqrt(len(set(blocks)))
    counts, index = block_counts(blocks, resamples, np.random.default_rng(seed))
    low, high = np.percentile(bootstrap_means(gains.to_numpy(), counts, index), [2.5, 97.5], axis=0)
    table = pd.DataFrame(
        {
            "improvement": gains.mean(),
            "calarena_margin": margin,
            "low": low,
            "high": high,
        }
    )
    table["rank"] = table["improvement"].rank(ascending=False, method="min").astype(int)
    return table.sort_values("improvement", ascending=False)
