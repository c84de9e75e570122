"""`calbench.validation`'s scope for arrays checked once (inner CV's fold slices)."""

import numpy as np
import pytest

from calbench import validation
from calbench.errors import CalbenchError
from calbench.validation import check_scores, scores_checked_once, trust_scores


@pytest.fixture
def reads(monkeypatch):
    """How many times `check_scores` read an array's entries."""
    count = [0]
    plain = validation._checked_scores

    def counted(*args):
        count[0] += 1
        return plain(*args)

    monkeypatch.setattr(validation, "_checked_scores", counted)
    return count


def test_a_trusted_array_is_read_once_within_the_scope_and_again_after(reads):
    a = np.ones((4, 3))
    with scores_checked_once():
        trust_scores(a, where="test")
        for _ in range(3):
            assert check_scores(a, "logits", "test") is a
    assert reads[0] == 1
    check_scores(a, "logits", "test")  # the scope has ended
    assert reads[0] == 2


def test_untrusted_arrays_and_conversions_are_still_checked_within_the_scope(reads):
    bad = np.ones((4, 3))
    bad[2, 1] = np.nan
    as_int = np.ones((4, 3), dtype=int)
    with scores_checked_once():
        trust_scores(np.ones((4, 3)), as_int, where="test")
        with pytest.raises(CalbenchError, match="NaN or infinite values"):
            check_scores(bad, "logits", "test")
        check_scores(as_int, "logits", "test")  # converted, so not the trusted object
    assert reads[0] == 4


def test_trust_outside_a_scope_checks_and_remembers_nothing(reads):
    a = np.ones((4, 3))
    with pytest.raises(CalbenchError, match="NaN or infinite"):
        trust_scores(np.full((2, 2), np.inf), where="test")
    trust_scores(a, where="test")
    check_scores(a, "logits", "test")
    assert reads[0] == 3


def test_inner_cv_reads_each_fold_slice_once(reads, rng):
    """The search's fits and held-out predictions read their six slices once (not at each
    of 6 points x 3 folds x fit and predict: 43 reads), while the pooled held-out
    predictions it scores, which change at every point, are read at every point."""
    from calbench.calibrators import make_calibrator
    from calbench.runner.selection import select_and_fit

    z = rng.normal(size=(300, 3))
    y = rng.integers(0, 3, 300)
    grid = {"reg_lambda": [0.1, 1.0, 10.0], "reg_mu": [0.1, 1.0]}
    select_and_fit(make_calibrator("ms_odir"), grid, z, y, inner_folds=3)
    assert reads[0] == 6 + 6 + 1  # the slices, each point's score, the final fit
