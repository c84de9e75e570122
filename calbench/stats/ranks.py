"""Ranking statistics over tasks (Kull 4.1, after Demšar 2006).

Methods are ranked on each task (1 = best, ties share the mean rank as the Friedman test
assumes); the Friedman test asks whether the average ranks differ; when it rejects, the
critical difference (CD) says how far apart two average ranks must be:

.. math:: CD = q_\\alpha \\sqrt{\\frac{k(k+1)}{6N}}

with k methods and N tasks. Nemenyi (all pairs): :math:`q_\\alpha` is the studentized range
quantile over :math:`\\sqrt 2`; Bonferroni-Dunn (each method against a control, Kull's
choice): the normal quantile at :math:`\\alpha / (2(k-1))`. scipy supplies the test and both
quantiles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from calbench.errors import CalbenchError, check_choice


@dataclass
class FriedmanResult:
    average_ranks: pd.Series  # per method, best first
    statistic: float
    p_value: float
    n_tasks: int
    critical_difference: float
    test: str
    alpha: float


def task_ranks(values: pd.DataFrame, higher_is_better: bool) -> pd.DataFrame:
    """Ranks within each row (task) of a tasks x methods table; ties get the mean rank."""
    return values.rank(axis=1, method="average", ascending=not higher_is_better)


def critical_difference(
    n_methods: int, n_tasks: int, alpha: float = 0.05, test: str = "nemenyi"
) -> float:
    check_choice(test, "test", "critical_difference", ("nemenyi", "bonferroni_dunn"))
    if test == "nemenyi":
        q = stats.studentized_range.ppf(1 - alpha, n_methods, np.inf) / np.sqrt(2)
    else:
        q = stats.norm.ppf(1 - alpha / (2 * (n_methods - 1)))
    return float(q * np.sqrt(n_methods * (n_methods + 1) / (6.0 * n_tasks)))


def friedman(
    values: pd.DataFrame, higher_is_better: bool, alpha: float = 0.05, test: str = "nemenyi"
) -> FriedmanResult:
    """Friedman test and CD on a tasks x methods table (rows with a missing value dropped)."""
    complete = values.dropna()
    if complete.shape[1] < 3 or len(complete) < 2:
        raise CalbenchError(
            f"The Friedman test needs at least 3 methods and 2 tasks with results for all of "
            f"them; got {complete.shape[1]} methods and {len(complete)} complete tasks."
        )
    ranks = task_ranks(complete, higher_is_better)
    statistic, p_value = stats.friedmanchisquare(*complete.to_numpy().T)
    return FriedmanResult(
        average_ranks=ranks.mean(axis=0).sort_values(),
        statistic=float(statistic),
        p_value=float(p_value),
        n_tasks=len(complete),
        critical_difference=critical_difference(complete.shape[1], len(complete), alpha, test),
        test=test,
        alpha=alpha,
    )
