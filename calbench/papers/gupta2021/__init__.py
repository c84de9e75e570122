"""Gupta et al. 2021: their spline recalibration as their recalibrate.py ran it (the
``*_gupta_code`` methods), registered beside the library's ``spline``."""

from calbench.papers.gupta2021.recalibrate import RecalibratePyEveryRank, RecalibratePySpline

CALIBRATORS = {
    "spline_gupta_code": (RecalibratePySpline, {}),
    "spline_gupta_every_rank_code": (RecalibratePyEveryRank, {}),
}
