"""Centred isotonic regression (Oron and Flournoy 2017), one-vs-rest, as cir_model builds it
(CalArena's CIR)."""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators.float32 import TINY32, OneVsRestFloor


def centred_isotonic_points(scores, outcomes, keep=(0.0, 1.0)):
    """Oron and Flournoy's CIR knots from the isotonic fit (as cir_model builds them): each
    flat run of the isotonic fit collapses to one point at its scores' mean, except runs at
    a value of ``keep`` (0 and 1) and the ends of the range, which keep their end points."""
    order = np.argsort(scores, kind="stable")
    x = np.asarray(scores, dtype=np.float64)[order]
    fitted = IsotonicRegression(out_of_bounds="clip").fit(x, np.asarray(outcomes)[order])
    level = fitted.predict(x)
    steps = level[np.sort(np.unique(level, return_index=True)[1])]
    points = set()
    for n, value in enumerate(steps):
        run = x[level == value]
        mean = run.mean()
        if value in keep:
            points.update({(run[0], value), (run[-1], value)})
        elif n == 0:
            points.update({(run[0], value), (mean, value)})
        elif n == len(steps) - 1:
            points.update({(mean, value), (run[-1], value)})
        else:
            points.add((mean, value))
    knots = np.array(sorted(points))
    return knots[:, 0], knots[:, 1]


class CenteredIsotonic(OneVsRestFloor):
    """Centred isotonic regression (Oron and Flournoy 2017) one-vs-rest: the isotonic fit's
    flat runs collapsed to points (`centred_isotonic_points`), then linear interpolation
    between them, as isotonic regression refitted on those points (cir_model) predicts;
    scores outside the calibration range take the end values (CalArena clips them).

    Parameters
    ----------
    two_class_floor : float
        A two-class task's floor (see `OneVsRestFloor`; 1e-30 before 2026-11-28).
    """

    def __init__(self, two_class_floor=TINY32):
        self.two_class_floor = two_class_floor

    def _fit_binary(self, scores, outcomes):
        x, y = centred_isotonic_points(scores, outcomes)
        # cir_model refits isotonic regression on the points: averaging duplicated scores
        # and pooling any violation the collapse leaves, which np.interp alone would not.
        return IsotonicRegression(out_of_bounds="clip").fit(x, y)

    def _apply_binary(self, fitted, scores):
        return np.clip(fitted.predict(scores), 0.0, 1.0)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "cir": (CenteredIsotonic, {}),
}
