r"""Decision calibration (Zhao et al. 2021; Valk 2.6, Algorithm 1) for losses with k decisions.

Each iteration finds a soft partition of the simplex into ``n_decisions`` parts with linear
boundaries, :math:`w(p) = \mathrm{softmax}(V p)`, that maximises the calibration violation
:math:`\sum_a \|\frac1n \sum_i w_a(p_i)(y_i - p_i)\|_2` (Adam on V, with the noise of Zhao's
code on the logits during the search), then adds to every prediction the least-squares
adjustment :math:`A = (W^\top W)^{-1} W^\top (Y - P)`, i.e. :math:`p \leftarrow p + w(p) A`.
After the last iteration the outputs are cropped onto the simplex (Valk Algorithm 2; Zhao's
code only clamps them, Valk normalises them).

By construction the weighted residual :math:`W^\top(Y - P')` of the fitting data after an
update is zero: every part of the partition is corrected on average.
"""

from __future__ import annotations

import copy

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.neighbourhood.kernel import crop, default_epsilon
from calbench.device import resolve_device
from calbench.lazy import LazyModule
from calbench.simplex import softmax

torch = LazyModule("torch")


def violation_gradient(scores, probs, residual):
    r"""The gradient in the partition's boundary V of the violation
    :math:`\sum_a \|\frac1n W_a^\top R\|_2`, :math:`W = \mathrm{softmax}(S)`,
    :math:`S = P V^\top` (+ noise), by hand: the search's 300 steps per partition cost a
    fraction of what autograd's graph costs on a 2-core CPU (tested against autograd)."""
    n = len(probs)
    weights = torch.softmax(scores, dim=1)
    violation = weights.T @ residual / n  # (decisions, classes)
    norms = violation.norm(dim=1, keepdim=True)
    d_weights = residual @ (violation / norms).T / n  # d violation / d W
    d_scores = weights * (d_weights - (weights * d_weights).sum(dim=1, keepdim=True))
    return d_scores.T @ probs


class _Adam:
    """torch.optim.Adam's update (defaults betas, eps; no weight decay) on one tensor, from
    a given gradient: the search needs no autograd graph."""

    def __init__(self, param, lr, betas=(0.9, 0.999), eps=1e-8):
        self.param, self.lr, self.betas, self.eps, self.t = param, lr, betas, eps, 0
        self.m, self.v = torch.zeros_like(param), torch.zeros_like(param)

    def step(self, grad):
        beta1, beta2 = self.betas
        self.t += 1
        self.m.mul_(beta1).add_(grad, alpha=1 - beta1)
        self.v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias1, bias2 = 1 - beta1**self.t, 1 - beta2**self.t
        denom = (self.v.sqrt() / np.sqrt(bias2)).add_(self.eps)
        self.param.addcdiv_(self.m, denom, value=-self.lr / bias1)


class DecisionCalibrator(Calibrator):
    """Parameters
    ----------
    n_decisions : int
        Decisions of the losses to calibrate for (2 in Valk's experiments).
    n_iterations : int
        Partitions found and corrected in turn (10 on Valk's synthetic data).
    n_steps : int
        Adam steps per partition search.
    learning_rate : float
    noise : float
        Standard deviation of the noise on the partition logits during the search.
    epsilon : float or None
        Cropping constant; None takes Valk's default for the number of classes.
    cropping : {"outside", "clip"}
        How outputs return to the simplex (`calbench.calibrators.neighbourhood.crop`):
        ``outside`` as Valk's code, ``clip`` as his Algorithm 2 as printed.
    random_state : int
    device : str
        Where the partitions are searched: ``cpu``, ``cuda`` (CPU with a warning when no GPU
        is present) or ``auto``; the noise is drawn on the CPU either way.
    """

    run_inputs = ("device",)
    prefix_params = ("n_iterations",)

    input_kind = "probabilities"

    def __init__(
        self,
        n_decisions=2,
        n_iterations=10,
        n_steps=300,
        learning_rate=1e-2,
        noise=0.1,
        epsilon=None,
        cropping="outside",
        random_state=0,
        device="cpu",
    ):
        self.n_decisions = n_decisions
        self.n_iterations = n_iterations
        self.n_steps = n_steps
        self.learning_rate = learning_rate
        self.noise = noise
        self.epsilon = epsilon
        self.cropping = cropping
        self.random_state = random_state
        self.device = device

    def _fit(self, logits, y):
        n_decisions = int(self.n_decisions)
        n_iterations, steps = int(self.n_iterations), int(self.n_steps)
        gen = torch.Generator().manual_seed(int(self.random_state))
        device = resolve_device(self.device)
        probs = torch.from_numpy(softmax(logits)).to(device)
        n, k = probs.shape
        labels = torch.zeros_like(probs)
        labels[torch.arange(n, device=device), torch.from_numpy(y).to(device)] = 1.0
        self.partitions_, self.adjustments_ = [], []
        current = probs.clone()
        for _ in range(n_iterations):
            boundary = (
                torch.randn(n_decisions, k, generator=gen, dtype=torch.float64) / np.sqrt(k)
            ).to(device)
            residual = labels - current
            adam = _Adam(boundary, self.learning_rate)
            for _ in range(steps):
                noise = torch.randn((n, n_decisions), generator=gen, dtype=torch.float64)
                scores = current @ boundary.T + self.noise * noise.to(device)
                adam.step(-violation_gradient(scores, current, residual))
            with torch.no_grad():
                weights = torch.softmax(current @ boundary.T, dim=1)
                adjustment = torch.linalg.lstsq(weights, residual).solution
                current = current + weights @ adjustment
            self.partitions_.append(boundary.detach().cpu().numpy().copy())
            self.adjustments_.append(adjustment.cpu().numpy().copy())
        self.epsilon_ = default_epsilon(k) if self.epsilon is None else float(self.epsilon)

    def truncated(self, key: str, value) -> DecisionCalibrator:
        """The first ``value`` corrections: what a fit with ``n_iterations=value`` gives
        (the partitions are searched in turn from one seeded generator)."""
        if key != "n_iterations" or not 1 <= int(value) <= len(self.partitions_):
            raise ValueError(f"cannot truncate to {key}={value!r}")
        model = copy.copy(self)
        model.n_iterations = int(value)
        model.partitions_ = self.partitions_[: int(value)]
        model.adjustments_ = self.adjustments_[: int(value)]
        return model

    def adjusted(self, probs: np.ndarray, n_iterations: int | None = None) -> np.ndarray:
        """Predictions after the first ``n_iterations`` corrections, before cropping."""
        out = np.array(probs, dtype=np.float64)
        for boundary, adjustment in list(zip(self.partitions_, self.adjustments_, strict=True))[
            :n_iterations
        ]:
            out = out + softmax(out @ boundary.T) @ adjustment
        return out

    def _predict_proba(self, logits):
        return crop(self.adjusted(softmax(logits)), self.epsilon_, self.cropping)


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "dec": (DecisionCalibrator, {}),
}
