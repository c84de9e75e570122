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


# A library user's inputs (an audit, 2026-11-29): each works, or its error names the fix.


def test_a_vector_of_scores_names_a_row_and_a_binary_tasks_columns():
    with pytest.raises(CalbenchError, match=r"a vector of 4 values. One row: logits\[None\]"):
        check_scores(np.zeros(4), "logits", "test")
    with pytest.raises(CalbenchError, match=r"np.column_stack\(\[1 - p, p\]\)"):
        check_scores(np.zeros(4), "probs", "test")


def test_logs_of_zero_probabilities_point_to_probs_to_logits():
    z = np.log(np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]) + 0.0 * np.ones((2, 3)))
    with pytest.raises(CalbenchError, match=r"1 values of -inf .*probs_to_logits"):
        check_scores(z, "logits", "test")


def test_labels_in_an_object_array_are_read_and_names_are_refused_with_the_fix():
    from calbench.validation import check_labels

    objects = np.array([0, 2, 1], dtype=object)  # a pandas column's integers
    np.testing.assert_array_equal(check_labels(objects, "y", "test", 3, 3), [0, 2, 1])
    with pytest.raises(CalbenchError, match=r"dtype <U3. Names as labels: np.unique"):
        check_labels(np.array(["cat", "dog", "eel"]), "y", "test", 3, 3)


def test_probabilities_fitted_as_logits_are_warned_of(rng):
    from calbench.calibrators import make_calibrator
    from calbench.simplex import softmax

    z = rng.normal(size=(200, 3))
    with pytest.warns(UserWarning, match="they look like probabilities"):
        make_calibrator("ts").fit(softmax(z), z.argmax(axis=1))


def test_a_frame_reordered_between_fit_and_predict_is_refused(rng):
    import pandas as pd

    from calbench.calibrators import make_calibrator

    z = pd.DataFrame(rng.normal(size=(200, 3)), columns=["cat", "dog", "eel"])
    model = make_calibrator("vs").fit(z, z.to_numpy().argmax(axis=1))
    np.testing.assert_allclose(model.predict_proba(z), model.predict_proba(z.to_numpy()))
    with pytest.raises(CalbenchError, match=r"fitted on \['cat', 'dog', 'eel'\]; select them"):
        model.predict_proba(z[["eel", "cat", "dog"]])


def test_a_metric_on_rows_off_the_simplex_names_the_row_and_the_fix():
    from calbench.metrics import brier

    p = np.array([[0.2, 0.3, 0.5], [-1e-16, 0.5 + 1e-16, 0.5]])
    with pytest.raises(CalbenchError, match=r"1 entries are negative \(row 1: -1e-16\).*np.clip"):
        brier(p, [0, 1])
    with pytest.raises(CalbenchError, match=r"row 0 sums to 1.0001\b.*p / p.sum"):
        brier(np.array([[0.2, 0.3, 0.5001], [0.2, 0.3, 0.5]]), [0, 1])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m, p, y: m.smooth_ece(p, y, bandwidth=0), "bandwidth must be a finite number"),
        (lambda m, p, y: m.smooth_ece(p, y, bandwidth=-0.1), "bandwidth must be a finite"),
        (lambda m, p, y: m.ks_error(p, y, mode="class", r=3), r"takes r in 0..2; got r=3"),
        (lambda m, p, y: m.ks_error(p, y, r=4), r"mode='top' takes r in 1..3; got r=4"),
        (lambda m, p, y: m.debiased_ece(p, y, n_bins=0), "'n_bins' parameter of debiased_ece"),
        (lambda m, p, y: m.debiased_ece(p, y, n_bins=2.7), "must be an int >= 1. Got 2.7"),
        (lambda m, p, y: m.kde_ece(p, y, order=3), "'order' parameter of kde_ece must be one"),
        (lambda m, p, y: m.log_loss(p, y, floor="float16"), "floor must be a probability"),
    ],
)
def test_a_metrics_options_are_checked(call, message, rng):
    """Each was a deep traceback (ZeroDivisionError, IndexError) or a quiet number."""
    from calbench import metrics
    from calbench.simplex import softmax

    p, y = softmax(rng.normal(size=(100, 3))), rng.integers(0, 3, 100)
    with pytest.raises(CalbenchError, match=message):
        call(metrics, p, y)
