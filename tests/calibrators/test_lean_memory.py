"""The fits' memory savings at large shapes change no number they should not: vector
scaling's Newton method on row chunks reaches scipy's minimum of the same objective with
the Hessian of finite differences; the softmax written over its logits, the features
packed beside their column of ones and the probabilities freed for a round give the same
bits as before."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from calbench.calibrators.solvers import newton_vector_lean
from calbench.calibrators.solvers.memory import features_with_ones, packed_features
from calbench.calibrators.solvers.newton_vector import (
    newton_vector,
    vector_label_sums,
    vector_log_loss,
)
from calbench.calibrators.solvers.preconditioned import fit_multinomial
from calbench.simplex import torch_softmax_log_loss


def _vector_data(rng, n=2500, k=30):
    x = rng.normal(size=(n, k)) * 2
    y = rng.integers(0, k, n)
    x[np.arange(n), y] += 2.0
    return x, y


def test_the_chunked_hessian_is_the_gradient_s_finite_differences(rng):
    x, y = _vector_data(rng, n=700, k=12)
    k = x.shape[1]
    w, b = rng.uniform(0.5, 1.5, k), rng.normal(size=k)
    pen_w, pen_b = np.full(k, 1e-3), np.full(k, 2e-3)
    sums = vector_label_sums(x, y)

    def gradient(theta):
        _, grad_w, grad_b, _ = vector_log_loss(theta[:k], theta[k:], x, y, sums)
        return np.concatenate([grad_w, grad_b]) + 2 * np.concatenate([pen_w, pen_b]) * theta

    theta, h = np.concatenate([w, b]), 1e-6
    numeric = np.array(
        [(gradient(theta + h * e) - gradient(theta - h * e)) / (2 * h) for e in np.eye(2 * k)]
    )
    hessian = newton_vector_lean.lean_vector_hessian(x, w, b, pen_w, pen_b)
    # float32 rank updates: the Hessian steers the step, good to float32's 1e-7 relative
    np.testing.assert_allclose(hessian, numeric, atol=1e-6 * np.abs(numeric).max())


def test_newton_on_row_chunks_reaches_scipy_s_minimum(rng, monkeypatch):
    x, y = _vector_data(rng)
    k = x.shape[1]
    pen_w, pen_b = 1e-3, 1e-4
    monkeypatch.setattr("calbench.calibrators.solvers.newton_vector.LEAN_ENTRIES", 1)
    monkeypatch.setattr(newton_vector_lean, "HESSIAN_CHUNK_ENTRIES", 997)  # many chunks
    w, b, steps, value = newton_vector(x, y, np.ones(k), np.zeros(k), pen_w=pen_w, pen_b=pen_b)
    sums = vector_label_sums(x, y)

    def objective(theta):
        loss, grad_w, grad_b, _ = vector_log_loss(theta[:k], theta[k:], x, y, sums)
        gap = theta[:k] - 1.0
        loss += pen_w * (gap**2).sum() + pen_b * (theta[k:] ** 2).sum()
        return loss, np.concatenate([grad_w + 2 * pen_w * gap, grad_b + 2 * pen_b * theta[k:]])

    start = np.concatenate([np.ones(k), np.zeros(k)])
    ref = minimize(
        objective,
        start,
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-11, "ftol": 1e-16, "maxiter": 5000},
    )
    assert steps < 20
    assert value == pytest.approx(ref.fun, abs=1e-12)
    np.testing.assert_allclose(w, ref.x[:k], atol=1e-6)
    np.testing.assert_allclose(b - b.mean(), ref.x[k:] - ref.x[k:].mean(), atol=1e-6)


def test_chord_steps_on_row_chunks_reach_newton_s_own_point(rng, monkeypatch):
    """The lean path reuses its Hessian (chord steps) from far larger decrements than the
    whole-array path: fewer Hessians, the same point as a fresh Hessian every step."""
    x, y = _vector_data(rng, n=3000, k=40)
    x *= 1.5
    k = x.shape[1]
    monkeypatch.setattr("calbench.calibrators.solvers.newton_vector.LEAN_ENTRIES", 1)
    built = []
    exact_hessian = newton_vector_lean.lean_vector_hessian
    monkeypatch.setattr(
        newton_vector_lean, "lean_vector_hessian", lambda *a: built.append(1) or exact_hessian(*a)
    )

    def fit():
        built.clear()
        out = newton_vector(x, y, np.ones(k), np.zeros(k), pen_w=1e-3, pen_b=1e-3, tol=1e-10)
        return out, len(built)

    (w, b, _, value), chord_hessians = fit()
    lean = newton_vector_lean
    monkeypatch.setattr(lean, "LEAN_REUSE_DECREMENT", lean.REUSE_DECREMENT)
    monkeypatch.setattr(lean, "LEAN_CHORD_GAIN", 0.0)
    (w0, b0, _, value0), newton_hessians = fit()
    assert chord_hessians < newton_hessians
    assert value == pytest.approx(value0, abs=1e-14)
    np.testing.assert_allclose(w, w0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(b - b.mean(), b0 - b0.mean(), rtol=0, atol=1e-9)


def test_the_softmax_over_its_logits_gives_the_same_bits(rng):
    z = rng.normal(size=(600, 50)) * 3
    z[::7] *= 400  # labels far below exp(-700) of their row's largest: the kept rows
    y = torch.from_numpy(rng.integers(0, 50, 600))
    value, probs = torch_softmax_log_loss(torch.from_numpy(z.copy()), y)
    logits = torch.from_numpy(z.copy())
    in_place, written = torch_softmax_log_loss(logits, y, in_place=True)
    assert in_place == value
    assert torch.equal(written, probs)
    assert written.data_ptr() == logits.data_ptr()


def test_packed_features_fit_as_their_copy_does(rng):
    x, y = _vector_data(rng, n=500, k=30)
    x = np.log(np.exp(x) / np.exp(x).sum(axis=1, keepdims=True))
    k = x.shape[1]
    ridge = np.full((k, k + 1), 1e-2)
    packed = packed_features(x)
    xt, offset = features_with_ones(packed, packed, "float64")
    assert np.shares_memory(xt, packed) and offset is packed
    a0 = np.zeros((k, k + 1))
    copied = fit_multinomial(x, y, a0, ridge, offset=x, max_iter=60)
    shared = fit_multinomial(packed, y, a0, ridge, offset=packed, max_iter=60)
    assert np.array_equal(copied.weights, shared.weights)
    assert copied.loss == shared.loss
    # a column that is not all ones is not taken for one
    packed.base[3, k] = 0.5
    xt, _ = features_with_ones(packed, packed, "float64")
    assert not np.shares_memory(xt, packed)
