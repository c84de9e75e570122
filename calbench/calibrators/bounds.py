r"""Probabilities the calibration data can support: the pseudo-count bound.

A map fitted to frequencies (isotonic regression, plain binning), a spline whose derivative
overshoots, or an unregularised network can put a class at exactly 0 or 1: on DenseNet-40
CIFAR-10, Gupta's spline gives 2722 of 10000 test rows a confidence of 1, 19 of them
wrong, and each such row makes the log-loss infinite. N calibration samples cannot show a
probability that small: by Laplace's rule of succession a class never seen in N trials
still has about 1/(N + 2).

With ``pseudo_count = a > 0`` a calibrator's predictions are smoothed as if ``a`` more
calibration samples had been seen, their labels spread evenly over the k classes:

.. math:: p' = \frac{N p + a / k}{N + a},

so every class keeps at least :math:`a / (k (N + a))` and no confidence reaches 1. The map
is increasing and affine, so rankings and the predicted class are unchanged, and no output
moves by more than :math:`a / (N + a)` (2e-4 at N = 5000, a = 1): binned and KS errors
barely notice, while log-loss and Brier lose their infinite terms.

Calibrators that can emit 0 or 1 take ``pseudo_count`` (`PseudoCountBound`), 0 in the
class (the published algorithm) and 1 under calbench's method names (``spline``,
``isotonic``, ``iop_full``, ``tva_histbin``, ``tva_isotonic``); the papers' variants
(``spline_gupta``, ``isotonic_plain``, ``iop_full_plain``, ``histbin_width_b10``, ``irm``,
``irova_ts``) keep 0, so the reproductions do not move. Every calibrator states its
`Calibrator.certainty`, which a test checks on the published file and on synthetic data.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator

#: A probability within this of 1 (or exactly 0) counts as a certainty.
CERTAIN = 1e-12


def pseudo_count_floor(n_samples: int, n_classes: int, pseudo_count: float) -> float:
    """The smallest class probability `with_pseudo_count` can give."""
    return pseudo_count / (n_classes * (n_samples + pseudo_count))


def with_pseudo_count(probs: np.ndarray, n_samples: int, pseudo_count: float) -> np.ndarray:
    """``probs`` smoothed by ``pseudo_count`` evenly labelled samples added to
    ``n_samples`` (the module's formula)."""
    k = probs.shape[1]
    return (n_samples * probs + pseudo_count / k) / (n_samples + pseudo_count)


def certain_rows(probs: np.ndarray) -> np.ndarray:
    """Rows holding a certainty: a class at exactly 0, or one within `CERTAIN` of 1."""
    return (probs <= 0.0).any(axis=1) | (probs.max(axis=1) >= 1.0 - CERTAIN)


class PseudoCountBound(Calibrator):
    """A calibrator whose fit can emit 0 or 1, bounded by ``pseudo_count`` (see the
    module): subclasses list ``pseudo_count`` among their parameters."""

    def certainty(self) -> str:
        return "bounded" if self.pseudo_count > 0 else "possible"

    def _bounded(self, probs: np.ndarray) -> np.ndarray:
        if self.pseudo_count <= 0:
            return probs
        return with_pseudo_count(probs, self.n_calibration_, self.pseudo_count)


def bound_hint(calibrator: Calibrator, bounded_method: str | None = None) -> str:
    """How to keep ``calibrator``'s predictions off 0 and 1, for a run's note
    (``bounded_method``: a method of the same calibrator that has the bound)."""
    keys = [k for k in calibrator.get_params(deep=True) if k.split("__")[-1] == "pseudo_count"]
    if calibrator.certainty() == "possible" and keys:
        also = f" (method={bounded_method} has it)" if bounded_method else ""
        return f"method.params.{keys[0]}=1 bounds them{also}; see calbench.calibrators.bounds."
    if calibrator.certainty() == "possible":
        source = getattr(calibrator, "_certainty_source", "")
        return source or "The map's fit reached them (see calbench.calibrators.bounds)."
    return "The map kept the classifier's most extreme scores."
