"""Convex families of loss matrices ``l_eps = l0 + eps l1``, eps in [0, 1] (Ho 3.4, 4.4, 4.5).

A family is what the Integral Loss is fitted to, and what Ho's risk-vs-eps curves are
drawn over: the calibrated predictions are fitted once, then for each eps the Bayes
decisions under ``l_eps`` are taken and their empirical risk recorded.

A prior shift to ``(1 - eps) p_train + eps p'`` is such a family too (eqs. 3.39-3.41):
weighting each cost by ``p_test(y) / p_train(y)`` gives ``l0 = l`` and
``l1 = (p' / p_train - 1) l``. Bayes decisions under that ``l_eps`` on the calibration-time
posteriors equal the decisions under ``l`` on the Bayes-corrected posteriors (eq. 3.36),
and its mean cost is the importance-weighted empirical risk (eq. 3.37).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench.decision.losses import convex_loss, make_loss
from calbench.decision.risk import empirical_risk
from calbench.errors import CalbenchError


@dataclass(frozen=True)
class LossFamily:
    l0: np.ndarray
    l1: np.ndarray

    def at(self, eps: float) -> np.ndarray:
        if not 0 <= eps <= 1:
            raise CalbenchError(f"loss family: eps must lie in [0, 1]; got {eps}.")
        return convex_loss(self.l0, self.l1, eps)

    def risks(self, probs, y, eps_points) -> np.ndarray:
        """Mean cost of the Bayes decisions under ``l_eps`` at each eps."""
        return np.array([empirical_risk(probs, y, self.at(eps)) for eps in eps_points])


def between(at_0, at_1) -> LossFamily:
    """The family whose ends are the loss matrices ``at_0`` (eps = 0) and ``at_1`` (eps = 1)."""
    at_0, at_1 = np.asarray(at_0, dtype=np.float64), np.asarray(at_1, dtype=np.float64)
    if at_0.shape != at_1.shape:
        raise CalbenchError(
            f"loss family: its ends have shapes {at_0.shape} and {at_1.shape}; both must "
            "have the same classes and actions."
        )
    return LossFamily(at_0, at_1 - at_0)


def prior_shift_family(loss, train_prior, target_prior) -> LossFamily:
    """Eqs. 3.40-3.41: the test prior ``(1 - eps) p_train + eps p'`` as a loss family."""
    loss = np.asarray(loss, dtype=np.float64)
    ratio = np.asarray(target_prior, dtype=np.float64) / np.asarray(train_prior)
    return LossFamily(loss, (ratio - 1)[:, None] * loss)


#: Metric-name prefix of a curve point; the eps follows (``empirical_risk@eps=0.25``).
CURVE_METRIC = "empirical_risk@eps="


def curve_metric(eps: float) -> str:
    return f"{CURVE_METRIC}{eps:.4g}"


def curve_eps(metric: str) -> float | None:
    """The eps of a curve metric's name, None for any other metric."""
    return float(metric[len(CURVE_METRIC) :]) if metric.startswith(CURVE_METRIC) else None


def configured_loss(spec: dict, n_classes: int) -> tuple[np.ndarray, LossFamily | None]:
    """A loss config's matrix (at its ``eps`` for a family) and its family, if any."""
    if "eps0" not in spec:
        options = {k: v for k, v in spec.items() if k not in ("name", "curve")}
        return make_loss(spec["name"], n_classes, **options), None
    if "eps1" not in spec or "eps" not in spec:
        raise CalbenchError(
            f"loss {spec['name']!r}: a loss family needs eps0, eps1 (loss configs) and eps "
            "(conf/loss/reject_cost_family.yaml)."
        )
    family = between(*(configured_loss(spec[k], n_classes)[0] for k in ("eps0", "eps1")))
    return family.at(spec["eps"]), family
