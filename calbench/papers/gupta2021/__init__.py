"""Gupta et al. 2021: their spline recalibration as their recalibrate.py ran it (the
``*_gupta_code`` methods), registered beside the library's ``spline``, and their KS error
in the float32 arithmetic it had on the Keras baselines' outputs
(``recalibrate_py_ks_error``, which the procedure twins of experiment gupta_ks_procedure
are scored with)."""

from calbench.metrics import UNIT, MetricSpec
from calbench.metrics.resampled import recomputed_whole
from calbench.papers.gupta2021.ks_float32 import recalibrate_py_ks_error
from calbench.papers.gupta2021.recalibrate import RecalibratePyEveryRank, RecalibratePySpline

CALIBRATORS = {
    "spline_gupta_code": (RecalibratePySpline, {}),
    "spline_gupta_every_rank_code": (RecalibratePyEveryRank, {}),
}

#: Gupta's KS error in his float32 arithmetic (`ks_float32`); recomputed whole on each
#: bootstrap resample.
METRICS = {
    "recalibrate_py_ks_error": MetricSpec(
        recalibrate_py_ks_error, "lower", UNIT, resampled=recomputed_whole
    ),
}
