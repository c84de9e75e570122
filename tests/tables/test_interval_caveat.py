"""A table that prints intervals of calibration-error estimates says what they are not."""

import numpy as np

from calbench.tables.intervals import _calibration_errors
from calbench.tables.layouts import RankedTable


def _table(metric):
    values = np.zeros((1, 1))
    return RankedTable(
        "t", "t", ["m"], [("", "d")], values, values, [], 3, sources=[[(metric, ("h",), 1.0)]]
    )


def test_estimates_of_calibration_error_get_the_caveat_others_do_not():
    for name in ("confidence_ece", "classwise_ece_kull", "ks_error", "kuiper_error", "mce"):
        assert _calibration_errors(_table(name)), name
    for name in ("log_loss", "brier", "accuracy", "confidence_ece_p_value", "cw_ece_accepted"):
        assert not _calibration_errors(_table(name)), name
