"""Composition of calibrators (Valk 3.5, Fig. 13): the second fitted on the first's output.

``Composition(first, second)`` fits ``first`` on the calibration data, maps the same data
through it, and fits ``second`` on the result; at prediction the maps are applied in turn.
The intermediate probabilities travel as ``log(clip(p))``, the one currency of logits.
Longer chains nest: ``Composition(a, Composition(b, c))``. Parameters of the steps are
reachable the scikit-learn way, e.g. ``second__n_neighbors`` in a grid.
"""

from __future__ import annotations

import copy

from sklearn.base import clone

from calbench.calibrators.base import Calibrator
from calbench.simplex import probs_to_logits


class Composition(Calibrator):
    def __init__(self, first=None, second=None):
        self.first = first
        self.second = second

    def _step_keys(self, keys_of) -> list[str]:
        return [
            f"{step}__{key}"
            for step in ("first", "second")
            if getattr(self, step) is not None
            for key in keys_of(getattr(self, step))
        ]

    def run_input_keys(self, name: str) -> list[str]:
        """Each step's run inputs, reached as ``first__param`` / ``second__param``."""
        return self._step_keys(lambda step: step.run_input_keys(name))

    def prefix_keys(self) -> list[str]:
        return self._step_keys(lambda step: step.prefix_keys())

    def truncated(self, key: str, value) -> Composition:
        step, _, inner = key.partition("__")
        model = copy.copy(self)
        setattr(model, step, clone(getattr(self, step)).set_params(**{inner: value}))
        setattr(model, f"{step}_", getattr(self, f"{step}_").truncated(inner, value))
        return model

    def certainty(self) -> str:
        """The second step's: it makes the predictions."""
        return self.second.certainty()

    def _fit(self, logits, y):
        self.first_ = clone(self.first).fit(logits, y)
        inner = probs_to_logits(self.first_.predict_proba(logits))
        self.second_ = clone(self.second).fit(inner, y)

    def _predict_proba(self, logits):
        inner = probs_to_logits(self.first_.predict_proba(logits))
        return self.second_.predict_proba(inner)
