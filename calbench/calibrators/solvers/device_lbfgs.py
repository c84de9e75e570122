"""L-BFGS for a torch tensor on a GPU that waits for the device once an evaluation.

Why not ``torch.optim.LBFGS``: its two-loop recursion passes each correction's
coefficient as a Python number (``add_(..., alpha=-al[i])``) and its line search compares
tensors, so every step stops the host about 48 times to read the device (counted: 44,396
reads in 933 steps of a 5000 x 100 ``ms_odir`` fit), and the GPU idles between the reads.
At ImageNet shape on an H100 that made a step cost 8.9 ms against an evaluation's 1.9 ms
of products; this one's steps cost 4.8 ms (the 36-point grid over 5 folds: 70.6 s to
37.8 s, `benchmarks/bench_gpu.py`).

Here the corrections ``s_i, y_i`` are rows of one device matrix, and the recursion runs on
the host over their inner products (``s_i . y_j``, ``y_i . y_j``, ``s_i . g``, ``y_i . g``),
which one matrix product brings back: the direction is then one more product. The line
search (strong Wolfe, Nocedal & Wright's algorithms 3.5 and 3.6 with cubic interpolation,
as torch's) works on Python numbers: each trial point costs one read, of its objective,
slope and largest gradient entry and of the products the next direction needs if the
point is accepted, so a step whose first trial is accepted waits for the device once.
The stopping rules are torch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: torch's (and Nocedal & Wright's) sufficient-decrease and curvature constants.
C1, C2 = 1e-4, 0.9
#: The line search's own change tolerance, fixed in torch's (the bracket's length times
#: the direction's largest entry, below which it stops).
LINE_SEARCH_TOLERANCE = 1e-9
#: A correction pair is kept only where ``y . s`` exceeds this, as torch's.
CURVATURE_FLOOR = 1e-10


@dataclass
class LbfgsResult:
    x: object  # the tensor reached
    n_iter: int
    evaluations: int


def minimise(
    evaluate: Callable,
    x0,
    *,
    max_iter: int,
    max_eval: int,
    tolerance_grad: float,
    tolerance_change: float,
    history: int = 20,
) -> LbfgsResult:
    """Minimise ``evaluate(x) -> (value as a 0-d tensor, gradient)`` from the 1-d tensor
    ``x0`` (not changed), with torch's `LBFGS` rules: at most ``max_iter`` steps and
    ``max_eval`` evaluations; stop where the largest gradient entry is at most
    ``tolerance_grad``, or a step, the objective's change or the slope is below
    ``tolerance_change``; first step ``min(1, 1 / |g|_1)``, then 1."""
    import torch

    x = x0.clone()
    # Rows 0..m-1 hold s_i, rows m..2m-1 y_i; `slots` lists the kept ones, oldest first.
    pairs = torch.zeros((2 * history, x.numel()), dtype=x.dtype, device=x.device)
    memory = _Memory(history)

    value, grad = evaluate(x)
    f, grad_max, grad_l1, grad_squared = _read(
        value, grad.abs().max(), grad.abs().sum(), grad @ grad
    )
    evaluations, n_iter = 1, 0
    if grad_max <= tolerance_grad:
        return LbfgsResult(x, n_iter, evaluations)
    direction, slope, step = -grad, -grad_squared, min(1.0, 1.0 / grad_l1)
    while True:
        n_iter += 1
        if slope > -tolerance_change:
            break
        search = _LineSearch(evaluate, x, direction, f, slope, grad, pairs)
        old_grad, f_before = grad, f
        # torch's allows the line search every evaluation left of max_eval
        step, f, grad, grad_max, products = search.run(step, max_eval - evaluations)
        evaluations += search.evaluations
        taken = direction * step
        x.add_(taken)
        if n_iter >= max_iter or evaluations >= max_eval or grad_max <= tolerance_grad:
            break
        if search.direction_max * step <= tolerance_change or abs(f - f_before) < tolerance_change:
            break
        direction, slope = memory.direction(pairs, taken, grad - old_grad, grad, products)
        step = 1.0
    return LbfgsResult(x, n_iter, evaluations)


def _read(*tensors) -> list[float]:
    """The 0-d tensors' values, in one wait for the device."""
    import torch

    return torch.stack([t.reshape(()) for t in tensors]).tolist()


class _Memory:
    """The kept correction pairs' inner products, on the host."""

    def __init__(self, history):
        self.history = history
        self.slots: list[int] = []  # rows of `pairs` in use, oldest first
        self.s_dot_y = np.zeros((history, history))  # [i, j] = s_i . y_j
        self.y_dot_y = np.zeros((history, history))
        self.gamma = 1.0  # the initial Hessian's scale, y . s / y . y of the newest pair

    def direction(self, pairs, s, y, grad, products=None):
        """``(-H g, g . (-H g))`` after keeping the pair ``(s, y)`` where its curvature
        allows: the two-loop recursion on inner products (module docstring). ``products``:
        `_products` of ``(s, y, grad)``, where the line search read them already."""
        import torch

        m, slots = self.history, self.slots
        s_dot_y, y_dot_y = self.s_dot_y, self.y_dot_y
        if products is None:
            products = _products(pairs, s, y, grad).cpu().numpy().reshape(-1, 3)
        with_pairs, among = products[: 2 * m], products[2 * m :]
        if among[0, 1] > CURVATURE_FLOOR:
            slot = slots.pop(0) if len(slots) == m else len(slots)
            pairs[slot] = s
            pairs[m + slot] = y
            for j in slots:
                s_dot_y[slot, j] = with_pairs[m + j, 0]  # s . y_j
                s_dot_y[j, slot] = with_pairs[j, 1]  # s_j . y
                y_dot_y[slot, j] = y_dot_y[j, slot] = with_pairs[m + j, 1]
            s_dot_y[slot, slot], y_dot_y[slot, slot] = among[0, 1], among[1, 1]
            with_pairs[slot, 2], with_pairs[m + slot, 2] = among[0, 2], among[1, 2]
            slots.append(slot)
            self.gamma = among[0, 1] / among[1, 1]
        gamma, order = self.gamma, np.array(slots, dtype=int)
        s_y = s_dot_y[np.ix_(order, order)]  # oldest first
        s_g, y_g = with_pairs[order, 2], with_pairs[m + order, 2]
        rho = 1.0 / np.diag(s_y)
        count = len(order)
        alpha = np.zeros(count)
        for i in range(count - 1, -1, -1):  # q = g - sum_j alpha_j y_j, newest first
            alpha[i] = rho[i] * (s_g[i] - s_y[i, i + 1 :] @ alpha[i + 1 :])
        q_dot_y = y_g - y_dot_y[np.ix_(order, order)] @ alpha
        beta = np.zeros(count)
        for i in range(count):  # r = gamma q + sum_j (alpha_j - beta_j) s_j, oldest first
            beta[i] = rho[i] * (gamma * q_dot_y[i] + (alpha[:i] - beta[:i]) @ s_y[:i, i])
        # -r = -gamma g + sum_j gamma alpha_j y_j + (beta_j - alpha_j) s_j
        coefficients = np.zeros(2 * m)
        coefficients[order] = beta - alpha
        coefficients[m + order] = gamma * alpha
        weights = torch.from_numpy(coefficients).to(grad)
        direction = torch.addmv(grad, pairs.T, weights, beta=-gamma)
        return direction, -gamma * among[2, 2] + float(coefficients @ with_pairs[:, 2])


def _products(pairs, s, y, grad):
    """The inner products the two-loop recursion needs, flat: each kept pair's vectors
    and then ``s``, ``y`` and ``grad`` against ``s``, ``y`` and ``grad``."""
    import torch

    vectors = torch.stack([s, y, grad])
    return torch.cat([pairs @ vectors.T, vectors @ vectors.T]).reshape(-1)


def _cubic_minimum(a, b, lower=None, upper=None) -> float:
    """The minimiser of the cubic through ``a = (t, f, slope)`` and ``b``, within [lower,
    upper] (the two points' interval where not given); their midpoint where the cubic has
    no minimum or the numbers overflow."""
    (t1, f1, g1), (t2, f2, g2) = a, b
    if lower is None:
        lower, upper = min(t1, t2), max(t1, t2)
    if t1 != t2:
        d1 = g1 + g2 - 3 * (f1 - f2) / (t1 - t2)
        square = d1 * d1 - g1 * g2
        if square >= 0:
            d2 = math.sqrt(square)
            if t1 <= t2:
                t = t2 - (t2 - t1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
            else:
                t = t1 - (t1 - t2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
            if math.isfinite(t):
                return min(max(t, lower), upper)
    return (lower + upper) / 2


class _LineSearch:
    """A strong Wolfe line search along ``direction`` from ``x`` (objective ``f0``, slope
    ``slope0``, gradient ``grad0``), torch's ``_strong_wolfe`` on Python numbers: each
    trial point is one evaluation and one read. Points are ``(step, objective, slope)``."""

    def __init__(self, evaluate, x, direction, f0, slope0, grad0, pairs):
        self.evaluate, self.x, self.direction = evaluate, x, direction
        self.f0, self.slope0, self.grad0, self.pairs = f0, slope0, grad0, pairs
        self.evaluations = 0
        self.direction_max = math.inf
        self.grads = {0.0: (grad0, math.inf, None)}
        self._direction_max = direction.abs().max()  # on the device, read with a trial

    def trial(self, step):
        """The point at ``x + step * direction``. The same read brings the two-loop
        recursion's products for the step to it (`_products`), needed where the search
        accepts it: most steps then wait for the device once."""
        import torch

        s = self.direction * step
        value, grad = self.evaluate(self.x + s)
        self.evaluations += 1
        numbers = torch.stack(
            [value.reshape(()), grad @ self.direction, grad.abs().max(), self._direction_max]
        )
        numbers = torch.cat([numbers, _products(self.pairs, s, grad - self.grad0, grad)])
        numbers = numbers.cpu().numpy()
        f, slope, grad_max, self.direction_max = (float(v) for v in numbers[:4])
        self.grads[step] = (grad, grad_max, numbers[4:].reshape(-1, 3))
        return step, (f if math.isfinite(f) else math.inf), slope

    def sufficient(self, point) -> bool:
        step, f, _ = point
        return f <= self.f0 + C1 * step * self.slope0

    def curved(self, point) -> bool:
        return abs(point[2]) <= -C2 * self.slope0

    def run(self, step, max_trials):
        """``(step, objective, gradient, largest gradient entry, the two-loop's products or
        None)`` of the point accepted, after at most ``max_trials + 1`` evaluations."""
        start = (0.0, self.f0, self.slope0)
        previous, point = start, self.trial(step)
        trials = 0
        while trials < max_trials:
            if not self.sufficient(point) or (trials > 1 and point[1] >= previous[1]):
                return self._zoom([previous, point], trials, max_trials)
            if self.curved(point):
                return self._result(point)
            if point[2] >= 0:
                return self._zoom([previous, point], trials, max_trials)
            # Extrapolate, to between 1.01 and 10 times the step.
            step = point[0]
            wider = _cubic_minimum(previous, point, step + 0.01 * (step - previous[0]), step * 10)
            previous, point = point, self.trial(wider)
            trials += 1
        return self._zoom([start, point], trials, max_trials)

    def _zoom(self, bracket, trials, max_trials):
        """The bracket's low point once a trial in it meets both conditions, the bracket is
        too short to move ``x`` by `LINE_SEARCH_TOLERANCE`, or the trials run out."""
        low = 0 if bracket[0][1] <= bracket[1][1] else 1
        insufficient = False
        while trials < max_trials:
            (t0, *_), (t1, *_) = bracket
            if abs(t1 - t0) * self.direction_max < LINE_SEARCH_TOLERANCE:
                break
            step = _cubic_minimum(*bracket)
            # A trial within a tenth of the bracket of its ends moves inside, at the second
            # such trial in a row or where it falls on an end.
            lower, upper = min(t0, t1), max(t0, t1)
            margin = 0.1 * (upper - lower)
            if min(upper - step, step - lower) < margin:
                if insufficient or step >= upper or step <= lower:
                    step = (
                        upper - margin if abs(step - upper) < abs(step - lower) else lower + margin
                    )
                    insufficient = False
                else:
                    insufficient = True
            else:
                insufficient = False
            point = self.trial(step)
            trials += 1
            if not self.sufficient(point) or point[1] >= bracket[low][1]:
                bracket[1 - low] = point
                low = 0 if bracket[0][1] <= bracket[1][1] else 1
                continue
            if self.curved(point):
                bracket[low] = point
                break
            if point[2] * (bracket[1 - low][0] - bracket[low][0]) >= 0:
                bracket[1 - low] = bracket[low]  # the old low becomes the high end
            bracket[low] = point
        return self._result(bracket[low])

    def _result(self, point):
        step, f, _ = point
        return step, f, *self.grads[step]


#: The device fit's gradient test within a round, as a share of ``tol``: torch's L-BFGS
#: rules stop at the first such point, where scipy's went on further; at ``tol`` itself a
#: weakly penalised 5000 x 100 fit (lambda = mu = 1) stopped 5e-6 above scipy's objective,
#: at a tenth 5e-9 above a 1e-9 reference, as scipy's own.
DEVICE_ROUND_TOL = 0.1


def rounds(in_weights, tol):
    """`fit_multinomial`'s rounds (`calbench.calibrators.solvers.preconditioned`) with
    L-BFGS on the tensors' device (`minimise`, torch's rules): the same 20 corrections, a
    strong Wolfe line search as scipy's, scipy's relative
    decrease ``tol * 1e-6`` made absolute at the round's start, the gradient test
    `DEVICE_ROUND_TOL` tighter."""

    def round_of(coordinates, a, value, grad, budget):  # noqa: ARG001 (evaluates its start)
        shape = a.shape

        def evaluate(theta):
            value, grad, _ = in_weights(coordinates.weights(theta.view(shape)))
            return value, coordinates.gradient(grad).reshape(-1)

        result = minimise(
            evaluate,
            coordinates.theta(a).reshape(-1),
            max_iter=budget,
            max_eval=budget * 5 // 4 + 1,
            tolerance_grad=tol * DEVICE_ROUND_TOL * coordinates.gradient_share,
            tolerance_change=tol * 1e-6 * max(abs(value), 1.0),
        )
        weights = coordinates.weights(result.x.view(shape))
        return weights, result.n_iter, result.n_iter >= budget, None

    return round_of
