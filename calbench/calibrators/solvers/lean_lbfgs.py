"""L-BFGS for parameter vectors too large for scipy's workspace: SMS's full map at 10,000
classes has 100 million weights (0.8 GB a float64 copy), and L-BFGS-B reserves 2 m + 5
copies for m corrections (36 GB at its m = 20), besides its own point and gradient.

Here the m corrections (default `LEAN_CORRECTIONS`) are kept in float32, half a float64
copy each: they only shape the quasi-Newton model, whose rounding moves the direction
but not the point L-BFGS stops at (the stopping test is the caller's exact gradient). The
two-loop recursion works in place on one float64 vector, the inner products a block at a
time (no float64 copy of a correction). The line search backtracks from the full step
(the caller's coordinates are preconditioned: their Hessian is near the identity) by a
safeguarded quadratic, on the sufficient-decrease condition only; a pair whose curvature
``s . y`` is not positive is not kept. So at most a handful of float64 vectors exist at
once: the point, its gradient, the direction, and a trial point with its gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Corrections kept (scipy's L-BFGS-B keeps 20 in calbench): SMS at 2,000 classes stops in
#: 3 steps, so more would never be used there.
LEAN_CORRECTIONS = 5
#: Entries of a correction widened to float64 at a time for an inner product (8 MB).
BLOCK = 1 << 20
#: Armijo's sufficient-decrease constant, and the backtracking's trials a step.
C1, MAX_TRIALS = 1e-4, 30
#: A trial whose objective is above the point's by at most this many units of rounding
#: of the objective, but whose largest gradient entry is smaller, is accepted: near the
#: minimum a step's decrease falls below the objective's rounding, where the gradient
#: still tells progress.
ROUNDING_UNITS = 8


@dataclass(frozen=True)
class LeanResult:
    theta: np.ndarray
    value: float
    gradient_max: float  # the caller's largest gradient entry at ``theta``
    n_iter: int
    evaluations: int


def _dot(low, high) -> float:
    """``low . high`` in float64, float32 vectors widened a block at a time."""
    return float(
        sum(
            low[i : i + BLOCK].astype(np.float64) @ high[i : i + BLOCK].astype(np.float64)
            for i in range(0, len(low), BLOCK)
        )
    )


def _axpy(alpha, low, out) -> None:
    """``out += alpha * low`` in float64, ``low`` float32, a block at a time."""
    for i in range(0, len(low), BLOCK):
        block = low[i : i + BLOCK].astype(np.float64)
        block *= alpha
        out[i : i + BLOCK] += block


class Corrections:
    """The last ``history`` pairs ``s = x_{k+1} - x_k``, ``y = g_{k+1} - g_k``, in float32."""

    def __init__(self, history: int, size: int):
        self.s = np.empty((history, size), dtype=np.float32)  # touched as filled
        self.y = np.empty((history, size), dtype=np.float32)
        self.slots: list[int] = []  # oldest first
        self.rho = np.zeros(history)
        self.gamma = 1.0

    def push(self, s, g_new, g_old) -> None:
        """Keep ``(s, g_new - g_old)`` where its curvature is positive (after rounding)."""
        free = [i for i in range(len(self.rho)) if i not in self.slots]
        slot = free[0] if free else self.slots.pop(0)  # (a pair refused frees the oldest)
        self.s[slot] = s
        for i in range(0, len(s), BLOCK):
            self.y[slot, i : i + BLOCK] = g_new[i : i + BLOCK] - g_old[i : i + BLOCK]
        s_dot_y = _dot(self.s[slot], self.y[slot])
        if not s_dot_y > 0:
            return
        y_dot_y = _dot(self.y[slot], self.y[slot])
        self.slots.append(slot)
        self.rho[slot] = 1.0 / s_dot_y
        self.gamma = s_dot_y / y_dot_y

    def direction(self, grad) -> np.ndarray:
        """``-H grad`` by the two-loop recursion, in one new float64 vector."""
        q = np.negative(grad)
        alpha = {}
        for slot in reversed(self.slots):
            alpha[slot] = self.rho[slot] * _dot(self.s[slot], q)
            _axpy(-alpha[slot], self.y[slot], q)
        q *= self.gamma
        for slot in self.slots:
            beta = self.rho[slot] * _dot(self.y[slot], q)
            _axpy(alpha[slot] - beta, self.s[slot], q)
        return q


def minimise(
    evaluate: Callable,
    theta: np.ndarray,
    value: float,
    grad: np.ndarray,
    grad_max: float,
    *,
    max_iter: int,
    tol: float,
    ftol: float,
    history: int = LEAN_CORRECTIONS,
) -> LeanResult:
    """Minimise from ``theta`` (objective ``value``, gradient ``grad``, the caller's largest
    gradient entry ``grad_max``), ``evaluate(theta) -> (value, grad, grad_max)``: stop where
    ``grad_max <= tol``, a step lowers the objective by at most ``ftol`` relative (scipy's
    rule), no trial of a step is accepted, or after ``max_iter`` steps."""
    memory = Corrections(history, theta.size)
    steps = evaluations = 0
    while grad_max > tol and steps < max_iter:
        direction = memory.direction(grad)
        slope = float(direction @ grad)
        if not slope < 0:  # the model lost positive curvature: start it again
            memory = Corrections(history, theta.size)
            direction, slope = np.negative(grad), -float(grad @ grad)
        accepted, trials = _backtrack(evaluate, theta, value, grad_max, direction, slope)
        evaluations += trials
        if accepted is None:
            break
        step, new_theta, new_value, new_grad, new_max = accepted
        steps += 1
        direction *= step
        memory.push(direction, new_grad, grad)
        del direction
        decrease = value - new_value
        theta, value, grad, grad_max = new_theta, new_value, new_grad, new_max
        if decrease <= ftol * max(abs(value), 1.0):
            break
    return LeanResult(theta, value, grad_max, steps, evaluations)


def _backtrack(evaluate, theta, value, grad_max, direction, slope):
    """``((step, theta, value, grad, grad_max) or None, trials)``: the first trial from the
    full step that decreases enough (or ties within rounding with a smaller gradient)."""
    step, rounding = 1.0, ROUNDING_UNITS * np.finfo(float).eps * max(abs(value), 1.0)
    for trial in range(1, MAX_TRIALS + 1):
        new_theta = direction * step
        new_theta += theta
        new_value, new_grad, new_max = evaluate(new_theta)
        if new_value <= value + C1 * step * slope or (
            new_value <= value + rounding and new_max < grad_max
        ):
            return (step, new_theta, new_value, new_grad, new_max), trial
        del new_theta, new_grad
        rise = new_value - value - slope * step  # the quadratic through both ends
        quadratic = -slope * step**2 / (2 * rise) if np.isfinite(rise) and rise > 0 else 0.0
        step = min(max(quadratic, 0.1 * step), 0.5 * step)
    return None, MAX_TRIALS
