"""The device L-BFGS (`calbench.calibrators.device_lbfgs`) is torch's `LBFGS` with the
strong Wolfe line search, step for step, without reading the device inside a step."""

import collections

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from calbench.calibrators.solvers import device_lbfgs

RULES = {"max_iter": 500, "max_eval": 700, "tolerance_grad": 1e-9, "tolerance_change": 1e-14}


def _rosenbrock(x):
    x = x.detach().requires_grad_(True)
    value = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
    value.backward()
    return value.detach(), x.grad


def _torch_lbfgs(objective, x0):
    x = x0.clone().requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [x], lr=1, history_size=20, line_search_fn="strong_wolfe", **RULES
    )

    def closure():
        value, grad = objective(x)
        x.grad = grad
        return value

    optimiser.step(closure)
    state = optimiser.state[x]
    return x.detach(), state["n_iter"], state["func_evals"]


def test_it_takes_torchs_steps_on_the_rosenbrock_function():
    """Non-convex, curved: the line search extrapolates, brackets and zooms."""
    x0 = torch.full((10,), -1.2, dtype=torch.float64)
    x0[1::2] = 1.0
    ours = device_lbfgs.minimise(_rosenbrock, x0, **RULES)
    x, steps, evaluations = _torch_lbfgs(_rosenbrock, x0)
    assert (ours.n_iter, ours.evaluations) == (steps, evaluations) == (76, 91)
    torch.testing.assert_close(ours.x, x, atol=1e-10, rtol=0)
    torch.testing.assert_close(ours.x, torch.ones(10, dtype=torch.float64), atol=1e-5, rtol=0)
    assert torch.equal(x0[:2], torch.tensor([-1.2, 1.0], dtype=torch.float64))  # x0 kept


def test_it_reaches_a_quadratics_minimum_with_its_history_full(rng):
    """60 dimensions, condition number 1e3: more steps than the 20 pairs it keeps. The
    two recursions round differently (their objectives part at the 12th digit after 37
    evaluations), so each run is held to the minimum, not to torch's path."""
    n = 60
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    a = torch.from_numpy(q @ np.diag(np.logspace(-2, 1, n)) @ q.T)
    b = torch.from_numpy(rng.normal(size=n))

    def quadratic(x):
        return 0.5 * x @ a @ x - b @ x, a @ x - b

    minimiser = torch.linalg.solve(a, b)
    least = float(quadratic(minimiser)[0])
    ours = device_lbfgs.minimise(quadratic, torch.zeros(n, dtype=torch.float64), **RULES)
    theirs, _, _ = _torch_lbfgs(quadratic, torch.zeros(n, dtype=torch.float64))
    assert 20 < ours.n_iter < RULES["max_iter"]  # stopped by a tolerance, not the budget
    for x in (ours.x, theirs):  # both at the minimum to 10 digits of the objective
        assert float(quadratic(x)[0]) - least <= 1e-10 * abs(least)
    torch.testing.assert_close(ours.x, minimiser, atol=1e-3, rtol=0)


class _Reads(TorchDispatchMode):
    """Counts the operators that return a tensor's value to Python one number at a time."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def test_no_step_reads_a_number_at_a_time():
    """torch's L-BFGS reads 48 numbers a step one by one (each a wait on a GPU); this one
    reads each trial point's numbers together, and the pairs' products once a step."""
    x0 = torch.full((10,), -1.2, dtype=torch.float64)
    with _Reads() as ours:
        device_lbfgs.minimise(_rosenbrock, x0, **RULES)
    with _Reads() as theirs:
        _torch_lbfgs(_rosenbrock, x0)
    assert ours.counts["aten._local_scalar_dense.default"] == 0
    assert theirs.counts["aten._local_scalar_dense.default"] > 76 * 20


@pytest.mark.parametrize("start", [1e-8, 1e3])
def test_a_line_search_from_a_poor_first_step_meets_both_wolfe_conditions(start):
    """From far too short a step it extrapolates, from far too long one it zooms; the point
    accepted lowers the objective enough and flattens the slope."""
    a = torch.tensor([1.0, 10.0], dtype=torch.float64)

    def objective(x):
        return 0.5 * (a * x * x).sum(), a * x

    x = torch.tensor([1.0, 1.0], dtype=torch.float64)
    value, grad = objective(x)
    pairs = torch.zeros((40, 2), dtype=torch.float64)  # no corrections kept yet
    search = device_lbfgs._LineSearch(
        objective, x, -grad, float(value), -float(grad @ grad), grad, pairs
    )
    step, f, new_grad, _, products = search.run(start, 25)
    # the step's own products, read with it: s . y, y . y and g . g at the point accepted
    s, y = -grad * step, new_grad - grad
    np.testing.assert_allclose(
        products[40:, :].ravel()[[1, 4, 8]],
        [float(s @ y), float(y @ y), float(new_grad @ new_grad)],
    )
    slope = float(new_grad @ -grad)
    assert f <= float(value) + device_lbfgs.C1 * step * -float(grad @ grad)
    assert abs(slope) <= device_lbfgs.C2 * float(grad @ grad)
    assert search.evaluations > 1
