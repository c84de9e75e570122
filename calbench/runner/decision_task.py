"""A cell's decision problem: the loss its Bayes decisions are scored with, the convex family
of losses it belongs to (a family ``loss=`` or a ``shift=``), and the risk curve over eps.

- A plain loss config (``loss=fungi_buy``) is one matrix; no family, no curve.
- A family loss config names its two ends (``eps0``, ``eps1``: loss configs), the eps of the
  run (``eps``: what the scalar metrics and the Direct Loss use) and the ``curve``.
- A prior shift (Ho 4.5) turns the run's loss into the family of eqs. 3.40-3.41 on each
  fold: the calibration labels give p_train, the configured long tail on the classes the
  model gets most wrong there gives p'. Its scalar metrics are taken at the shift's ``eps``.
  Ho tells the Bayes correction the test prior; ``shift.estimate: em`` or ``bbse`` has it
  estimated from the unlabelled test posteriors instead (`calbench.decision.shift`).

A curve (``curve: {points, direct_at}``) records the mean test risk of the Bayes decisions
under ``l_eps`` at ``points`` equally spaced eps in [0, 1], each as a metric named
``empirical_risk@eps=<eps>``. The Direct Loss is trained knowing eps (Ho 4.4), so a Direct
Loss cell fits once per eps of ``direct_at`` and records only those points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench.decision.family import (
    LossFamily,
    configured_loss,
    curve_metric,
    prior_shift_family,
)
from calbench.decision.risk import empirical_risk
from calbench.decision.shift import (
    ESTIMATES,
    check_prior,
    estimated_ratios,
    long_tail_prior,
    mixed_prior,
)
from calbench.errors import CalbenchError, check_choice


@dataclass(frozen=True)
class DecisionTask:
    loss: np.ndarray  # scores the scalar metrics (at the run's eps)
    family: LossFamily | None = None
    eps: float | None = None
    curve: dict | None = None
    priors: tuple[np.ndarray, np.ndarray] | None = None  # (p_train, p_test) under a shift
    target: np.ndarray | None = None  # p', the prior the shift moves towards
    estimate: str = "known"  # how the Bayes correction learns p_test (shift.estimate)

    def training_loss(self, eps: float | None = None) -> np.ndarray:
        """The loss a decision criterion is fitted to at ``eps`` (default: the run's)."""
        if self.family is None:
            return self.loss
        return self.family.at(self.eps if eps is None else eps)

    @property
    def curve_points(self) -> np.ndarray:
        return np.linspace(0.0, 1.0, self.curve["points"]) if self.curve else np.array([])

    @property
    def direct_points(self) -> list[float]:
        return list(self.curve["direct_at"]) if self.curve else []

    def curve_values(self, probs, y, eps_points=None, validation=None) -> dict[str, float]:
        """The risk curve's points; with an estimated test prior, the decisions at each eps
        use the ratios estimated from the test population at that eps (`estimated_ratio`)
        while the risk keeps the true importance weights."""
        points = self.curve_points if eps_points is None else eps_points
        if self.family is None or not len(points):
            return {}
        if self.estimate == "known":
            risks = self.family.risks(probs, y, points)
        else:
            risks = [
                empirical_risk(
                    probs * self.estimated_ratio(probs, y, eps, validation),
                    y,
                    self.loss,
                    weights=self.true_ratio(eps)[y],
                )
                for eps in points
            ]
        return {curve_metric(e): float(r) for e, r in zip(points, risks, strict=True)}

    def estimated_ratio(self, probs, y, eps=None, validation=None) -> np.ndarray | None:
        """p_test / p_train at ``eps`` (default: the run's) as ``estimate`` finds it from the
        test posteriors, weighted by the true importance weights so that they stand for the
        shifted population (Ho eq. 3.37); None where the prior is known. ``validation``:
        the calibration data's (calibrated posteriors, labels), which BBSE needs."""
        if self.estimate == "known":
            return None
        weights = self.true_ratio(self.eps if eps is None else eps)[y]
        fit_probs, fit_y = validation if validation is not None else (None, None)
        return estimated_ratios(self.estimate, probs, self.priors[0], weights, fit_probs, fit_y)

    def true_ratio(self, eps: float) -> np.ndarray:
        """p_test / p_train per class at ``eps``: the importance weights of eq. 3.37."""
        train = self.priors[0]
        return mixed_prior(train, self.target, eps) / train


def _checked_curve(curve, where: str) -> dict | None:
    if not curve:
        return None
    points, direct_at = curve.get("points"), list(curve.get("direct_at") or [])
    if not isinstance(points, int) or points < 2 or any(not 0 <= e <= 1 for e in direct_at):
        raise CalbenchError(
            f"{where}: curve needs points (an integer >= 2) and direct_at (eps in [0, 1]); "
            f"got {curve}."
        )
    grid = np.linspace(0.0, 1.0, points)
    off_grid = [e for e in direct_at if not np.isclose(grid, e, atol=1e-9).any()]
    if off_grid:  # every line of a figure and table must have a value at the Direct points
        raise CalbenchError(
            f"{where}: curve.direct_at {off_grid} are not among the {points} equally spaced "
            f"curve points; pick points so that (points - 1) * eps is a whole number."
        )
    return {"points": points, "direct_at": direct_at}


def fold_priors(shift: dict, fold, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(p_train, p') of a long-tail shift on one fold, from its calibration data only."""
    if shift.get("kind") != "long_tail":
        raise CalbenchError(
            f"shift {shift['name']!r}: unknown kind {shift.get('kind')!r}; known: long_tail "
            "(conf/shift/lt_k1.yaml)."
        )
    y_fit = np.concatenate([m.y_fit for m in fold.members])
    predicted = np.concatenate([m.logits_fit.argmax(axis=1) for m in fold.members])
    counts = np.bincount(y_fit, minlength=n_classes)
    train = check_prior(counts / counts.sum(), n_classes, f"shift {shift['name']}", positive=True)
    accuracy = np.bincount(y_fit, weights=predicted == y_fit, minlength=n_classes) / counts
    return train, long_tail_prior(accuracy, shift["k"])


def decision_task(loss_cfg: dict, shift: dict, fold, n_classes: int) -> DecisionTask:
    """The decision problem of a run's ``loss`` and ``shift`` config groups on ``fold``
    (None: a fold-free loss only)."""
    loss, family = configured_loss(loss_cfg, n_classes)
    if shift["name"] == "none":
        if family is None:
            return DecisionTask(loss)
        curve = _checked_curve(loss_cfg.get("curve"), f"loss {loss_cfg['name']!r}")
        return DecisionTask(loss, family, float(loss_cfg["eps"]), curve)
    if family is not None:
        raise CalbenchError(
            f"loss {loss_cfg['name']!r} is a loss family and shift {shift['name']!r} makes "
            "another one; pick one of them (a plain loss with the shift)."
        )
    if fold is None:
        raise CalbenchError(
            f"shift {shift['name']!r} needs a fold's calibration labels; run it as a cell."
        )
    train, target = fold_priors(shift, fold, n_classes)
    eps = float(shift["eps"])
    estimate = shift.get("estimate", "known")
    check_choice(estimate, "estimate", f"shift {shift['name']!r}", ESTIMATES)
    return DecisionTask(
        loss,
        prior_shift_family(loss, train, target),
        eps,
        _checked_curve(shift.get("curve"), f"shift {shift['name']!r}"),
        (train, mixed_prior(train, target, eps)),
        target,
        estimate,
    )
