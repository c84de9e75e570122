"""Multi-class isotonic regression (Zhang et al. 2020's ``irm``): one increasing map fitted to
every (p_ij, 1[y_i = j]) pair at once, ties broken by 1e-9 p, rows renormalised."""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators.bounds import PseudoCountBound
from calbench.simplex import softmax

#: Zhang et al.'s tie-breaking weight of the original probabilities.
TIE_BREAK = 1e-9


def _normalise(probs):
    return probs / probs.sum(axis=1, keepdims=True)


class MulticlassIsotonicRegression(PseudoCountBound):
    """Multi-class isotonic regression (Zhang et al. 2020, IRM): one increasing map fitted
    to every (p_ij, 1[y_i = j]) pair at once, plus 1e-9 p to keep the order of ties, rows
    renormalised onto the simplex (Zhang et al.'s code does not renormalise).

    Parameters
    ----------
    pseudo_count : float
        Smooth the predictions as if this many evenly labelled samples were added to the
        calibration set (`calbench.calibrators.bounds`); 0, Zhang et al.'s map (the
        method ``irm``), gives confidences of exactly 1 where the top block is all hits.
    """

    input_kind = "probabilities"

    def __init__(self, pseudo_count=0.0):
        self.pseudo_count = pseudo_count

    def _fit(self, logits, y):
        probs = softmax(logits)
        targets = np.zeros_like(probs)
        targets[np.arange(len(y)), y] = 1.0
        self.isotonic_ = IsotonicRegression(out_of_bounds="clip").fit(
            probs.ravel(), targets.ravel()
        )

    def _predict_proba(self, logits):
        probs = softmax(logits)
        mapped = self.isotonic_.predict(probs.ravel()).reshape(probs.shape)
        return _normalise(mapped + TIE_BREAK * probs)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "irm": (MulticlassIsotonicRegression, {}),
}
