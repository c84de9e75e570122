"""Valk's decision calibration as his code runs it: the procedure behind his TS+DEC rows
(msc-knn-cal ``helpers/dec_cal.py``, Zhao et al.'s code with Valk's changes, called as
``calibrate_with_deccal`` on his temperature-scaled float32 probabilities).

What differs from calbench's ``dec`` (`calbench.calibrators.decision.decision_calibration`):

- **Search.** Each critic is ``nn.Linear(k, 2, bias=False)`` (uniform in
  ``+-1/sqrt(k)``) trained by torch's Adam, lr 1e-2, for 1000 epochs of 10 steps, the rate
  times 0.8 every 50 epochs (``StepLR``), with noise 0.1 on its scores, maximising
  ``sum_a ||mean_i softmax(W p_i)_a (y_i - p_i)||_2``; all in float32. calbench's ``dec``
  takes 300 steps at a fixed rate per partition, in float64.
- **Adjustment.** ``(W^T W)^-1 W^T (Y - P)`` of the trained critic without noise, as his
  last epoch leaves it.
- **Clamping.** Each critic trains on the predictions so far clamped to ``[1e-7, 1 -
  1e-7]``; the corrections themselves accumulate unclamped, and the output is clamped,
  then his ``force_p_to_simplex``.
- **Iterations.** 100 critics are trained; his ``calibrate_with_deccal`` keeps the first
  1 to 99 by the Brier score *on the test set* (his Table 3: "determined unfairly"). Here
  ``n_iterations`` is a prefix parameter: the protocol ``holdout_test_selected`` chooses it
  on the test set as he did (for reproducing his rows only).
- **Randomness.** His run was not seeded; ``seed`` seeds numpy's generator for the
  initial weights and the noise (his drew both from torch's global generator), so a spread
  over seeds stands in for his unknown draw. With two actions the noise is drawn once per
  row, on their scores' difference (``sqrt(2)`` times his per-action noise): the same
  distribution of the softmax, half the draws.
"""

from __future__ import annotations

import copy

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import COUNT
from calbench.calibrators.neighbourhood.kernel import default_epsilon
from calbench.calibrators.solvers.threads import blas_threads
from calbench.papers.valk2022.reference_valk import (
    force_p_to_simplex,
    valk_probabilities,
    valk_temperature,
)
from calbench.simplex import softmax

#: His clamp of the corrected predictions (``CalibratorDecision.__call__``).
CLAMP = 1e-7


def train_critic(probs, labels_onehot, rng, *, epochs, steps, lr, noise, n_actions):
    """One critic as his ``CriticDecision.optimize`` trains it, in float32: ``(weights (a,
    k), adjustment (a, k))``.

    Written out in numpy with the actions along the rows (``(a, n)``): his step is torch's
    autograd through ``(n, a, k)`` products, 4 ms at 5000 x 10 on a 2-core machine, and
    his 10,000 steps a critic (a million a fit) are the procedure's whole time. The
    gradient of ``-sum_a ||V_a||`` with ``V = S R / n``, ``S = softmax(W P^T + noise)``:
    ``dS = -(V / ||V||) R^T / n``, through the softmax, times ``P``; Adam is torch's
    update (betas 0.9, 0.999; eps 1e-8). `_CriticStep` and `_Adam` work in buffers
    allocated once, and an epoch's noise is drawn in one block (the generator's stream
    unchanged): the same float32 operations in the same order as one expression a step,
    bit for bit (tests/papers/valk2022/test_reference_dec.py keeps that loop).
    """
    n, k = probs.shape
    f32 = np.float32
    bound = 1.0 / np.sqrt(k)
    weight = ((rng.random((n_actions, k), dtype=f32) * 2 - 1) * f32(bound)).astype(f32)
    probs_t = np.ascontiguousarray(probs.T, dtype=f32)  # (k, n)
    residual_t = np.ascontiguousarray((labels_onehot - probs).T, dtype=f32)
    step = _CriticStep(probs_t, residual_t, n_actions)
    adam = _Adam(weight)
    # A softmax of two sees only the noises' difference: one normal a row, on the first.
    shape = (steps, n) if n_actions == 2 else (steps, n_actions, n)
    scale = f32(noise * np.sqrt(2)) if n_actions == 2 else f32(noise)
    noises = np.empty(shape, dtype=f32)
    for epoch in range(epochs):
        rate = lr * 0.8 ** (epoch // 50)  # his StepLR(step_size=50, gamma=0.8)
        rng.standard_normal(dtype=f32, out=noises)  # steps x the per-step draws, in order
        noises *= scale
        for row in noises:
            adam.update(weight, step.gradient(weight, row), rate)
    action = weight @ probs_t
    action = np.exp(action - action.max(axis=0))
    action /= action.sum(axis=0)
    adjustment = np.linalg.inv(action @ action.T) @ (action @ residual_t.T)
    return weight, adjustment.astype(f32)


class _CriticStep:
    """The gradient of a critic's loss at ``weight`` with the step's noise, its ``(a, n)``
    and ``(a, k)`` intermediates kept in buffers; each operation is the one of the
    expression it replaces (a negation moved onto a matmul's factor is exact)."""

    def __init__(self, probs_t, residual_t, n_actions):
        (k, n), f32 = probs_t.shape, np.float32
        self.probs_t, self.residual_t, self.two = probs_t, residual_t, n_actions == 2
        self.scores, self.d_scores, self.product = (np.empty((n_actions, n), f32) for _ in "sdp")
        self.column = np.empty(n, f32)
        self.violation, self.grad = np.empty((n_actions, k), f32), np.empty((n_actions, k), f32)
        self.n = f32(n)

    def gradient(self, weight, noise):
        scores, d_scores, violation = self.scores, self.d_scores, self.violation
        np.matmul(weight, self.probs_t, out=scores)
        if self.two:
            scores[0] += noise
        else:
            scores += noise
        scores -= self._over_actions(np.maximum, scores)
        np.exp(scores, out=scores)
        scores /= self._over_actions(np.add, scores)  # softmax over the actions: (a, n)
        np.matmul(scores, self.residual_t.T, out=violation)
        violation /= self.n  # V: (a, k)
        norms = np.sqrt((violation * violation).sum(axis=1, keepdims=True))
        np.matmul(np.negative(violation / norms), self.residual_t, out=d_scores)
        d_scores /= self.n  # dS before the softmax
        d_scores -= self._over_actions(np.add, np.multiply(scores, d_scores, out=self.product))
        d_scores *= scores
        return np.matmul(d_scores, self.probs_t.T, out=self.grad)

    def _over_actions(self, ufunc, rows):
        """``ufunc.reduce(rows, axis=0)`` into the column buffer; of two rows, the one
        elementwise call that reduction makes (2 us less each at 5000 rows)."""
        if self.two:
            return ufunc(rows[0], rows[1], out=self.column)
        return ufunc.reduce(rows, axis=0, out=self.column)


class _Adam:
    """torch's Adam (betas 0.9, 0.999; eps 1e-8) on ``weight`` in place, its moments and
    temporaries in buffers, each operation the one of torch's formula written out."""

    def __init__(self, weight):
        self.first, self.second = np.zeros_like(weight), np.zeros_like(weight)
        self.scratch, self.denom = np.empty_like(weight), np.empty_like(weight)
        self.t = 0

    def update(self, weight, grad, rate):
        f32, first, second = np.float32, self.first, self.second
        scratch, denom = self.scratch, self.denom
        self.t += 1
        first *= f32(0.9)
        first += np.multiply(grad, f32(0.1), out=scratch)
        second *= f32(0.999)
        np.multiply(grad, f32(0.001), out=scratch)
        second += np.multiply(scratch, grad, out=scratch)  # (0.001 g) g, as written
        np.sqrt(second, out=denom)
        denom /= f32(np.sqrt(1 - 0.999**self.t))
        denom += f32(1e-8)
        np.multiply(first, f32(rate / (1 - 0.9**self.t)), out=scratch)
        weight -= np.divide(scratch, denom, out=scratch)


class ValkDecisionCalibration(Calibrator):
    """Valk's decision calibration, his code's procedure (module docstring).

    Parameters
    ----------
    n_critics : int
        Critics trained (his: 100).
    n_iterations : int
        The first critics applied (his choice: 1 to 99 on the test set); at most
        ``n_critics``.
    epochs, steps : int
        Epochs per critic and Adam steps per epoch (his: 1000, 10).
    learning_rate, noise : float
    n_actions : int
        Decisions of the losses calibrated for (his: 2).
    temperature : bool
        His temperature scaling first (his ``dec2TS``).
    seed : int
    """

    prefix_params = ("n_iterations",)
    _parameter_constraints = {"n_critics": COUNT, "epochs": COUNT, "steps": COUNT}

    def __init__(
        self,
        n_critics=100,
        n_iterations=100,
        epochs=1000,
        steps=10,
        learning_rate=1e-2,
        noise=0.1,
        n_actions=2,
        temperature=True,
        seed=0,
    ):
        self.n_critics = n_critics
        self.n_iterations = n_iterations
        self.epochs = epochs
        self.steps = steps
        self.learning_rate = learning_rate
        self.noise = noise
        self.n_actions = n_actions
        self.temperature = temperature
        self.seed = seed

    def _fit(self, logits, y):
        self.temperature_ = valk_temperature(logits, y) if self.temperature else None
        probs = valk_probabilities(logits, self.temperature_)
        k = probs.shape[1]
        labels = np.eye(k, dtype=np.float32)[y]
        rng = np.random.default_rng(int(self.seed))
        self.critics_ = []
        current = probs.copy()
        with blas_threads(1):  # products of 5000 x 10: threads cost more than they save
            for _ in range(int(self.n_critics)):
                critic = train_critic(
                    np.clip(current, CLAMP, 1 - CLAMP),
                    labels,
                    rng,
                    epochs=int(self.epochs),
                    steps=int(self.steps),
                    lr=float(self.learning_rate),
                    noise=float(self.noise),
                    n_actions=int(self.n_actions),
                )
                self.critics_.append(critic)
                current = self._corrected(current, [critic])
        self.crop_ = default_epsilon(k)

    @staticmethod
    def _corrected(x, critics):
        """His ``__call__`` before the clamp: each critic's ``softmax(x W^T) A`` added."""
        for weight, adjustment in critics:
            x = x + (softmax(x @ weight.T) @ adjustment).astype(np.float32)
        return x

    def truncated(self, key, value):
        if key != "n_iterations" or not 1 <= int(value) <= len(self.critics_):
            raise ValueError(f"cannot truncate to {key}={value!r}")
        model = copy.copy(self)
        model.n_iterations = int(value)
        return model

    def _predict_proba(self, logits):
        probs = valk_probabilities(logits, self.temperature_)
        used = self.critics_[: min(int(self.n_iterations), len(self.critics_))]
        out = np.clip(self._corrected(probs, used), CLAMP, 1 - CLAMP)
        return force_p_to_simplex(out, self.crop_)
