"""Kull et al.'s TempS of their non-neural study (`calbench.calibrators.reference_newton`)
against dirichlet_python's ``MultinomialRegression(method='FixDiag')`` at commit 6c750d9
written out here as its code is written, with torch's autograd in the place of jax's
``grad`` and ``hessian`` of the clipped objective."""

import numpy as np
import pytest
import torch

from calbench.calibrators import make_calibrator
from calbench.calibrators.reference_newton import KullNewtonTemperature
from calbench.simplex import probs_to_logits


def _objective(params, X, y, k):
    t = params[0]
    raw = torch.cat([torch.eye(k, dtype=torch.float64) * t, torch.zeros(k, 1)], dim=1)
    weights = raw - raw[-1:, :].repeat(k, 1)  # ref_row
    mul = X @ weights.T
    shift = mul - mul.max(dim=1, keepdim=True).values
    exps = torch.exp(shift)
    outputs = exps / exps.sum(dim=1, keepdim=True)
    eps = np.finfo(np.float64).eps
    outputs = torch.clamp(outputs, eps, 1 - eps)  # clip_jax
    return torch.mean(-torch.log(torch.sum(y * outputs, dim=1)))


def _newton_update(weights_0, X, target, k, maxiter=1024, ftol=1e-12, gtol=1e-8):
    def objective(w):
        return float(_objective(torch.tensor(w), X, target, k))

    def gradient(w):
        return torch.autograd.functional.jacobian(
            lambda p: _objective(p, X, target, k), torch.tensor(w)
        ).numpy()

    def hessian(w):
        return torch.autograd.functional.hessian(
            lambda p: _objective(p, X, target, k), torch.tensor(w)
        ).numpy()

    L_list = [objective(weights_0)]
    weights = weights_0.copy()
    for i in range(0, maxiter):
        grad = gradient(weights)
        if np.abs(grad).sum() < gtol:
            break
        updates = grad / hessian(weights)  # FixDiag
        for step_size in np.hstack((np.linspace(1, 0.1, 10), np.logspace(-2, -32, 31))):
            tmp_w = weights - (updates * step_size).ravel()
            L = objective(tmp_w)
            if (L - L_list[-1]) < 0:
                break
        L_list.append(float(L))
        if np.isnan(L):
            break
        if i >= 5:
            if (float(np.min(np.diff(L_list[-5:]))) > -ftol) & (
                float(np.sum(np.diff(L_list[-5:])) > 0) == 0
            ):
                weights = tmp_w.copy()
                break
        if (L_list[-1] - L_list[-2]) > 0:
            break
        else:
            weights = tmp_w.copy()
    return weights


def _kull_temperature_scaling(scores, y):
    """TemperatureScaling(logit_constant=0.0).fit: ln clip(p, tiny, 1 - tiny) - 0.0, then
    MultinomialRegression FixDiag from the identity (t = 1)."""
    tiny = np.finfo(scores.dtype).tiny
    X = np.log(np.clip(scores, tiny, 1 - tiny)) - 0.0
    X_ = torch.tensor(np.hstack((X, np.ones((len(X), 1)))))
    k = scores.shape[1]
    target = torch.tensor(np.eye(k)[y])
    return _newton_update(np.ones(1), X_, target, k)[0]


def _knn_like(seed, n=400, k=4):
    """Scores a 3-nearest-neighbour classifier gives: thirds, with exact zeros."""
    rng = np.random.default_rng(seed)
    votes = rng.integers(0, k, size=(n, 3))
    scores = np.stack([(votes == j).sum(1) / 3 for j in range(k)], axis=1)
    y = np.where(rng.random(n) < 0.7, votes[:, 0], rng.integers(0, k, n))
    return scores, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_temperature_follows_their_newton_on_the_clipped_loss(seed):
    scores, y = _knn_like(seed)
    theirs = _kull_temperature_scaling(scores, y)
    calibrator = KullNewtonTemperature().fit(probs_to_logits(scores), y)
    np.testing.assert_allclose(calibrator.inverse_temperature_, theirs, rtol=1e-10)
    assert calibrator.n_iter_ >= 1 and theirs != 1.0


def test_zero_classes_stay_near_zero_unlike_the_optimum():
    """The clipped rows carry no gradient, so the zeros are not lifted; calbench's ts (the
    unclipped optimum) lifts them by softening far more."""
    scores, y = _knn_like(5)
    logits = probs_to_logits(scores)
    kull = make_calibrator("ts_kull_uci").fit(logits, y)
    optimum = make_calibrator("ts").fit(logits, y)
    zeros = scores == 0
    assert kull.predict_proba(logits)[zeros].max() < 1e-200
    assert optimum.predict_proba(logits)[zeros].min() > 1e-6
