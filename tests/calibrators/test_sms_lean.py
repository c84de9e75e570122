"""SMS's lean path (`calbench.calibrators.solvers.multinomial_lean`, for shapes where
scipy's L-BFGS-B would not fit in memory) reaches the minimum the other paths reach, and
is taken only where asked for or where they would not fit."""

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.calibrators.matrix import sms_memory, structured
from calbench.calibrators.solvers import lean_lbfgs, multinomial_lean
from calbench.calibrators.solvers.memory import packed_features
from calbench.calibrators.solvers.preconditioned import fit_multinomial


def _data(rng, n, k):
    u = rng.normal(size=(n, k))
    y = rng.integers(0, k, n)
    u[np.arange(n), y] += 2.0
    return 2.5 * u, y


@pytest.mark.parametrize(("n", "k"), [(300, 30), (400, 40)])
def test_the_lean_path_reaches_the_same_minimum(rng, n, k):
    """At 30 classes against Newton's fit, at 40 against scipy's preconditioned L-BFGS."""
    z, y = _data(rng, n, k)
    full = make_calibrator("sms").fit(z, y)
    lean = make_calibrator("sms", lean="always").fit(z, y)
    np.testing.assert_allclose(lean.coef_, full.coef_, atol=1e-7)
    np.testing.assert_allclose(lean.intercept_, full.intercept_, atol=1e-7)
    assert abs(lean.loss_ - full.loss_) <= 1e-10
    assert lean.gradient_max_ <= lean.tol


def test_the_chunked_objective_is_fit_multinomial_s(rng, monkeypatch):
    """Many chunks: the same objective and gradient as the whole-array evaluation, and the
    preconditioner's sums as `RowPreconditioner` builds them from the probabilities."""
    n, k = 500, 12
    x = -rng.exponential(size=(n, k))
    y = rng.integers(0, k, n)
    a = rng.normal(scale=0.1, size=(k, k + 1))
    ridge = multinomial_lean.Ridge(0.3, 0.02, 0.01)
    monkeypatch.setattr(multinomial_lean, "LEAN_CHUNK_ENTRIES", 7 * (k + 1))  # 72 chunks
    value, grad, sums = multinomial_lean.lean_terms(
        packed_features(x).base, y, a, ridge, curvature=True
    )
    penalty = np.full((k, k + 1), ridge.off_diagonal)
    penalty[np.arange(k), np.arange(k)] = ridge.diagonal
    penalty[:, k] = ridge.intercept
    logits = x + x @ a[:, :k].T + a[:, k]
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    p = np.exp(logp)
    expected = -logp[np.arange(n), y].mean() + (penalty * a**2).sum()
    residual = p.copy()
    residual[np.arange(n), y] -= 1
    xt = np.hstack([x, np.ones((n, 1))])
    assert value == pytest.approx(expected, rel=1e-13)
    np.testing.assert_allclose(grad, residual.T @ xt / n + 2 * penalty * a, atol=1e-14)
    u = p * (1 - p)
    np.testing.assert_allclose(sums[0], u.T @ xt**2 / n + 2 * penalty, rtol=1e-5)  # float32
    np.testing.assert_allclose(sums[1], u.T @ xt / n, rtol=1e-5)
    np.testing.assert_allclose(sums[2][:, 0], u.mean(axis=0), rtol=1e-12)


def test_the_lean_lbfgs_minimises_a_quadratic_with_float32_corrections(rng):
    """An ill-conditioned quadratic: to the gradient test, with 3 corrections."""
    scales = np.logspace(0, 2, 50)
    target = rng.normal(size=50)

    def evaluate(theta):
        gap = theta - target
        grad = scales * gap
        return 0.5 * float(gap @ grad), grad, float(np.abs(grad).max())

    theta = np.zeros(50)
    result = lean_lbfgs.minimise(
        evaluate, theta, *evaluate(theta), max_iter=500, tol=1e-9, ftol=0.0, history=3
    )
    assert result.gradient_max <= 1e-9
    np.testing.assert_allclose(result.theta, target, atol=1e-10)


def test_the_current_path_is_kept_where_it_fits(rng, monkeypatch):
    """Memory enough (or unknown) for scipy's path: the lean one is never taken, so every
    number of a shape that fits stays as before; asked for, it is."""
    z, y = _data(rng, 200, 40)
    called = []
    monkeypatch.setattr(
        structured.StructuredScaling, "_fit_matrix_lean", lambda *a: called.append(1)
    )
    for available in (None, 10**12):
        monkeypatch.setattr(sms_memory, "available_memory", lambda a=available: a)
        make_calibrator("sms").fit(z, y)
        make_calibrator("sms", lean="never").fit(z, y)
    assert not called
    full, lean = sms_memory.sms_memory_needs(25_000, 10_000)
    assert lean < 21e9 < full  # 10,000 classes on this machine's 21 GB: lean only
    assert sms_memory.check_sms_memory(100, 30, "always")
    # Above 1,000 classes or from 5e6 features "auto" takes the lean path whatever the
    # memory (a shape's path must not depend on the machine), in float64 only; below
    # both, scipy's where it fits.
    monkeypatch.setattr(sms_memory, "available_memory", lambda: 10**12)
    assert sms_memory.check_sms_memory(4_000, 1_001)
    assert sms_memory.check_sms_memory(25_000, 1_000)
    assert sms_memory.check_sms_memory(50_000, 100)
    assert not sms_memory.check_sms_memory(49_999, 100)
    assert not sms_memory.check_sms_memory(4_999, 1_000)
    assert not sms_memory.check_sms_memory(25_000, 2_000, "never")
    assert not sms_memory.check_sms_memory(25_000, 2_000, precision="float32")


def test_fit_multinomial_and_the_lean_fit_agree_beyond_newton_s_limit(rng):
    """The two fits of the same objective from the same start, side by side."""
    n, k = 600, 45
    x = np.log(rng.dirichlet(np.ones(k), size=n))
    y = rng.integers(0, k, n)
    ridge = multinomial_lean.Ridge(1.0, 0.1, 0.1)
    penalty = np.full((k, k + 1), ridge.off_diagonal)
    penalty[np.arange(k), np.arange(k)] = ridge.diagonal
    penalty[:, k] = ridge.intercept
    a0 = np.zeros((k, k + 1))
    reference = fit_multinomial(x, y, a0, penalty, offset=x, tol=1e-9)
    lean = multinomial_lean.fit_multinomial_lean(
        packed_features(x).base, y, np.ones(k), np.zeros(k), ridge, max_iter=2000, tol=1e-9
    )
    assert lean.gradient_max <= 1e-9
    assert abs(lean.loss - reference.loss) <= 1e-12
    np.testing.assert_allclose(lean.weights, reference.weights, atol=1e-7)


def test_the_lean_warm_start_is_newton_s_diagonal_minimum(rng):
    """`fit_vector` with SMS's diagonal ridge reaches `newton_vector`'s minimum."""
    from calbench.calibrators.solvers.newton_vector import newton_vector
    from calbench.calibrators.solvers.vector_lbfgs import fit_vector

    n, k = 800, 25
    x = np.log(rng.dirichlet(np.ones(k), size=n))
    y = rng.integers(0, k, n)
    w, b, _, value = newton_vector(x, y, np.ones(k), np.zeros(k), pen_w=0.03, pen_b=0.02)
    fit = fit_vector(x, y, np.ones(k), np.zeros(k), tol=1e-10, pen_w=0.03, pen_b=0.02)
    assert fit.loss == pytest.approx(value, abs=1e-12)
    np.testing.assert_allclose(fit.weights, np.stack([w, b]), atol=1e-7)
