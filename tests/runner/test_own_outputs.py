"""A researcher's own class that returns bad predictions gets one line naming the fault and
her class, not a metric's complaint about the data's shapes, nor "a bug in the calibrator,
please report it" (found by a newcomer's audit, 2026-11-29)."""

import numpy as np
import pytest

from calbench.calibrators import Calibrator
from calbench.errors import CalbenchError
from calbench.runner.cell import run_cell
from calbench.simplex import softmax
from tests.runner.test_runner import plan


class Bad(Calibrator):
    """Predictions off in one way, by name: ``fault`` is what it does wrong."""

    def __init__(self, fault="negative"):
        self.fault = fault

    def _fit(self, logits, y):
        self.k_ = logits.shape[1]

    def _predict_proba(self, logits):
        p = softmax(logits)
        if self.fault == "negative":  # rows still sum to 1
            return 2.0 * p - 1.0 / self.k_
        if self.fault == "column":
            return np.hstack([p, np.zeros((len(p), 1))])
        if self.fault == "row":
            return p[1:]
        if self.fault == "infinite":
            p[0] = np.nan
            return p
        return p * 1.01


@pytest.mark.parametrize(
    "fault, message",
    [
        (
            "negative",
            r"negative probabilities \(\d+ rows, the lowest -0\.\d+\).*Bad's "
            "_predict_proba must return rows of non-negative probabilities that sum to 1",
        ),
        ("sum", r"rows that do not sum to 1 \(largest error 0\.01\).*Bad's _predict_proba"),
        ("infinite", r"NaN or infinite probabilities \(1 rows\).*Its fit with .*Bad's parameters"),
        (
            "column",
            r"Bad\._predict_proba returned an array of shape \(\d+, 4\) for logits of "
            r"shape \(\d+, 3\): it must return one row of 3 probabilities",
        ),
        ("row", r"Bad\._predict_proba returned an array of shape \((\d+), 3\) for logits"),
    ],
)
def test_her_class_s_bad_predictions_are_named_as_hers(fault, message):
    own = f"{__name__}:Bad"
    cell = plan("method.name=bad", f"method.calibrator={own}", f"+method.params.fault={fault}")
    with pytest.raises(CalbenchError, match=message) as error:
        run_cell(cell)
    assert "please report it" not in str(error.value)


class SetsItsParameter(Calibrator):
    """Writes what it learned into its own parameter, against the contract."""

    def __init__(self, weight=None):
        self.weight = weight

    def _fit(self, logits, y):
        self.weight = 0.5

    def _predict_proba(self, logits):
        return softmax(logits)


def test_her_class_that_sets_its_own_parameter_in_fit_is_refused():
    """It was stored silently, its cell named by weight=None while it ran at 0.5."""
    z = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(CalbenchError, match=r"changed its parameter 'weight' from None to 0.5"):
        SetsItsParameter().fit(z, np.arange(50) % 3)
    Bad().fit(z, np.arange(50) % 3)  # its parameters untouched: fine
