"""A user's own calibrator, named as ``module:Class`` rather than registered
(``method.calibrator=tests.calibrators.own_calibrator:Shrink``): the shared contract tests
(`tests.calibrators.test_calibrators`, `test_estimator_checks`, `test_bounds`) run over it
as over every registered calibrator, so the route keeps the contract the library's own do."""

import numpy as np

from calbench.calibrators import Calibrator
from calbench.calibrators.constraints import NON_NEGATIVE, Choice
from calbench.simplex import softmax

#: The name the contract tests give it.
OWN_CALIBRATOR = "tests.calibrators.own_calibrator:Shrink"


class Shrink(Calibrator):
    """The model's probabilities mixed with a prior: ``weight * softmax(z) + (1 - weight) *
    prior``, the prior the calibration labels' class frequencies (one pseudo-count a class,
    so none is 0) or the uniform distribution.

    Parameters
    ----------
    weight : float
        The model's share, in [0, 1).
    prior : {"labels", "uniform"}
        What the rest goes to.
    """

    _parameter_constraints = {"weight": NON_NEGATIVE, "prior": Choice("labels", "uniform")}
    # Every prior class is above 0 and the weight below 1: no row reaches 0 or 1.
    _certainty = "never"

    def __init__(self, weight=0.9, prior="labels"):
        self.weight = weight
        self.prior = prior

    def _fit(self, logits, y):
        k = logits.shape[1]
        if self.prior == "uniform":
            self.prior_ = np.full(k, 1.0 / k)
        else:
            self.prior_ = (np.bincount(y, minlength=k) + 1.0) / (len(y) + k)

    def _predict_proba(self, logits):
        return self.weight * softmax(logits) + (1 - self.weight) * self.prior_
