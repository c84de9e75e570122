"""Kull et al.'s TempS of their non-neural study (`calbench.papers.kull2019.reference_fixdiag`)
against dirichlet_python's ``FixedDiagonalDirichletCalibrator.fit`` (calib/fixeddirichlet.py,
2019-01-18 to the pinned 6c750d9) written out here as its code is written, with torch's
autograd in the place of autograd's ``grad``; its per-epoch shuffle is left out (it only
reorders the sums)."""

import numpy as np
import pytest
import torch

from calbench.calibrators import make_calibrator
from calbench.simplex import probs_to_logits


def _objective(T, X, y_hot):
    tmp_prod = T * torch.log(X)
    prob_y = torch.exp(tmp_prod) / torch.sum(torch.exp(tmp_prod), dim=1).reshape(-1, 1)
    return -torch.sum(torch.log(torch.sum(prob_y * y_hot, dim=1)))


def _fit(X, y, batch_size=128, lr=1e-3, beta_1=0.9, beta_2=0.999, eeps=1e-8, maxiter=1024):
    X, factor = torch.tensor(X), 1e-4
    k, n_y = X.shape[1], X.shape[0]
    y_hot = torch.tensor(np.eye(k)[y])
    L, m, v = [], np.zeros(1), np.zeros(1)
    T = 1.0
    fin_T = T
    batch_num = len(np.hstack([np.arange(0, n_y, batch_size), n_y])) - 1
    for _ in range(0, maxiter):
        batch_L = []
        for _ in range(0, batch_num):
            t = torch.tensor(float(np.asarray(T).item()), dtype=torch.float64, requires_grad=True)
            L_t = _objective(t, X, y_hot)
            g_t = torch.autograd.grad(L_t, t)[0].item()
            m = beta_1 * m + (1 - beta_1) * g_t
            v = beta_2 * v + (1 - beta_2) * g_t * g_t
            T = T - lr * m / (v**0.5 + eeps)
            batch_L.append(L_t.item())
        L.append(np.sum(batch_L))
        if len(L) >= 2:
            if L[-1] < np.min(L[:-1]):
                fin_T = T.copy()
        if len(L) > 32:
            previous_opt = np.min(L.copy()[:-32])
            current_opt = np.min(L.copy()[-32:])
            if previous_opt - current_opt <= np.abs(previous_opt * factor):
                break
    return float(np.asarray(fin_T).item())


def _scores(seed, n, k, power, zeros):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(k), n)
    y = np.array([rng.choice(k, p=row) for row in p])
    p = p**power / (p**power).sum(axis=1, keepdims=True)  # over- or under-confident
    if zeros:
        p[rng.random(p.shape) < 0.2] = 0.0
        p[p.sum(axis=1) == 0, 0] = 1.0
        p /= p.sum(axis=1, keepdims=True)
    return p, y


@pytest.mark.parametrize("seed,power", [(0, 3.0), (1, 0.5)])
def test_temperature_follows_their_adam_fit(seed, power):
    p, y = _scores(seed, 300, 3, power, zeros=False)
    ours = make_calibrator("ts_kull_uci").fit(probs_to_logits(p), y)
    theirs = _fit(p, y)
    assert theirs != 1.0
    np.testing.assert_allclose(ours.inverse_temperature_, theirs, rtol=1e-9)
    powered = p**theirs
    np.testing.assert_allclose(
        ours.predict_proba(probs_to_logits(p)), powered / powered.sum(1, keepdims=True)
    )


def test_a_zero_probability_leaves_the_identity_as_their_nan_gradient_does():
    """knn, tree and forest scores hold exact zeros: their gradient is NaN at the first step
    and the fit keeps T = 1 (Kull Tables 1-2 rank TempS level with Uncal there), where
    calbench's ts softens."""
    p, y = _scores(2, 300, 4, 3.0, zeros=True)
    assert _fit(p, y) == 1.0
    logits = probs_to_logits(p)
    ours = make_calibrator("ts_kull_uci").fit(logits, y)
    assert ours.inverse_temperature_ == 1.0 and ours.n_epochs_ == 1
    np.testing.assert_allclose(ours.predict_proba(logits), p, atol=1e-300)
    assert make_calibrator("ts").fit(logits, y).predict_proba(logits)[p == 0].min() > 1e-12
