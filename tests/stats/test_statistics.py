"""Friedman test and critical differences against Demšar (2006) and scipy."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from calbench.errors import CalbenchError
from calbench.stats.ranks import critical_difference, friedman, task_ranks

# Demšar 2006, Table 5: q_0.05 for k = 2..10.
NEMENYI = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]
BONFERRONI_DUNN = [1.960, 2.241, 2.394, 2.498, 2.576, 2.638, 2.690, 2.724, 2.773]


# Demšar prints 2.724 for k = 9, but the normal quantile at 0.05 / 16 is 2.734 (his k = 8
# and k = 10 entries are the quantiles), so k = 9 is taken as a misprint and skipped.
@pytest.mark.parametrize("k", [2, 3, 4, 5, 6, 7, 8, 10])
def test_critical_values_match_demsar_table(k):
    scale = np.sqrt(k * (k + 1) / (6 * 30))
    assert critical_difference(k, 30) / scale == pytest.approx(NEMENYI[k - 2], abs=1e-3)
    assert critical_difference(k, 30, test="bonferroni_dunn") / scale == pytest.approx(
        BONFERRONI_DUNN[k - 2], abs=1e-3
    )


def test_friedman_against_scipy_and_hand_ranks(rng):
    values = pd.DataFrame(rng.normal(size=(12, 5)), columns=list("abcde"))
    values["e"] -= 1.0  # a clearly better method (lower is better)
    result = friedman(values, higher_is_better=False)
    statistic, p_value = stats.friedmanchisquare(*values.to_numpy().T)
    assert result.statistic == pytest.approx(statistic) and result.p_value == pytest.approx(p_value)
    hand = np.mean([stats.rankdata(row) for row in values.to_numpy()], axis=0)
    np.testing.assert_allclose(result.average_ranks[list("abcde")], hand)
    assert result.average_ranks.index[0] == "e"
    assert result.critical_difference == pytest.approx(2.728 * np.sqrt(5 * 6 / (6 * 12)), abs=1e-3)


def test_ties_share_the_mean_rank_and_direction():
    values = pd.DataFrame([[0.1, 0.1, 0.3]], columns=list("abc"))
    np.testing.assert_allclose(task_ranks(values, False).iloc[0], [1.5, 1.5, 3])
    np.testing.assert_allclose(task_ranks(values, True).iloc[0], [2.5, 2.5, 1])


def test_too_few_methods_is_clear():
    with pytest.raises(CalbenchError, match="at least 3 methods"):
        friedman(pd.DataFrame({"a": [1, 2], "b": [2, 1]}), higher_is_better=False)
