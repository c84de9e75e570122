"""Valk's decision calibration as his code runs it (`calbench.papers.valk2022.reference_dec`)
against his procedure written out here as his code is written (msc-knn-cal
helpers/dec_cal.py: torch autograd, torch.optim.Adam, StepLR, clamping), fed the same
draws: calbench draws the initial weights and the noise from numpy's generator, his code
from torch's global one, so the written-out critic takes them as given."""

import numpy as np
import torch
import torch.nn.functional as F

from calbench.calibrators import make_calibrator
from calbench.papers.valk2022.reference_dec import ValkDecisionCalibration
from calbench.papers.valk2022.reference_valk import force_p_to_simplex, valk_probabilities

#: Valk's DEC small enough for contract tests (its defaults take a million Adam steps).
SMALL_DEC = {"n_critics": 2, "epochs": 2, "steps": 3}


class _Draws:
    """calbench's stream, handed to his code: ``rng.random`` for the weights, one normal
    per row for a two-action critic (the noises' difference, scaled by sqrt 2)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def init(self, k):
        return (self.rng.random((2, k), dtype=np.float32) * 2 - 1) * np.float32(1 / np.sqrt(k))

    def noise(self, n):
        e = self.rng.standard_normal(n, dtype=np.float32) * np.float32(np.sqrt(2))
        return torch.from_numpy(np.stack([e, np.zeros_like(e)], axis=1))


class _Critic(torch.nn.Module):  # his CriticDecision, its noise handed in
    def __init__(self, init):
        super().__init__()
        self.fc = torch.nn.Linear(init.shape[1], 2, bias=False)
        self.fc.weight.data = torch.from_numpy(init.copy())
        self.adjustment = None

    def forward(self, x, noise=None):
        fc = self.fc(x)
        return F.softmax(fc if noise is None else fc + noise * 0.1, dim=1)

    def diff(self, labels, pred, noise=None):
        labels = F.one_hot(labels, num_classes=pred.shape[1])
        weights = self.forward(pred, noise).view(-1, 2, 1)
        return weights * (labels - pred).view(-1, 1, pred.shape[1])

    def optimize(self, pred, labels, epochs, draws):
        optim = torch.optim.Adam(self.fc.parameters(), lr=1e-2)
        schedule = torch.optim.lr_scheduler.StepLR(optim, step_size=50, gamma=0.8)
        for _ in range(epochs):
            for _ in range(10):
                optim.zero_grad()
                loss = -self.diff(labels, pred, draws.noise(len(pred))).mean(dim=0).norm(dim=-1)
                loss.sum().backward()
                optim.step()
            with torch.no_grad():  # his evaluate_adjustment
                labels1 = F.one_hot(labels, num_classes=pred.shape[1])
                weights = self.forward(pred).unsqueeze(-1)
                diff = weights * (labels1 - pred).view(-1, 1, pred.shape[1])
                coeff = torch.linalg.inv(weights[:, :, 0].T @ weights[:, :, 0])
                self.adjustment = (coeff @ diff.sum(dim=0)).unsqueeze(0)
            schedule.step()


def _his_call(critics, x, max_critic):  # CalibratorDecision.__call__
    for index, critic in enumerate(critics):
        if index == max_critic:
            break
        with torch.no_grad():
            x = x + (critic.adjustment * critic(x).unsqueeze(-1)).sum(dim=1)
    return x.clamp(min=1e-7, max=1 - 1e-7)


def test_decision_calibration_follows_valks_code():
    rng = np.random.default_rng(3)
    k, n = 4, 300
    logits = (rng.normal(size=(n + 200, k)) * 2).astype(np.float32).astype(np.float64)
    y = rng.integers(0, k, n + 200)
    epochs, n_critics = 55, 2  # across StepLR's first step (epoch 50)
    ours = ValkDecisionCalibration(
        n_critics=n_critics, epochs=epochs, temperature=False, seed=5
    ).fit(logits[:n], y[:n])

    draws = _Draws(5)
    p_train = torch.from_numpy(valk_probabilities(logits[:n]))
    labels = torch.from_numpy(y[:n])
    critics = []
    for _ in range(n_critics):
        updated = _his_call(critics, p_train, -1)
        critic = _Critic(draws.init(k))
        critic.optimize(updated, labels, epochs, draws)
        critics.append(critic)
        weight, adjustment = ours.critics_[len(critics) - 1]
        np.testing.assert_allclose(weight, critic.fc.weight.detach().numpy(), rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(adjustment, critic.adjustment[0].numpy(), rtol=1e-3, atol=1e-5)

    p_test = torch.from_numpy(valk_probabilities(logits[n:]))
    for used in range(1, n_critics + 1):
        theirs = force_p_to_simplex(_his_call(critics, p_test, used).numpy(), 1e-4)
        mine = ours.truncated("n_iterations", used).predict_proba(logits[n:])
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-6)
    moved = ours.truncated("n_iterations", n_critics).predict_proba(logits[n:])
    assert np.abs(moved - force_p_to_simplex(p_test.numpy(), 1e-4)).max() > 1e-3


def test_valks_decision_calibration_carries_his_settings():
    model = make_calibrator("ts_dec_valk_code")
    assert (model.n_critics, model.epochs, model.steps, model.temperature) == (100, 1000, 10, True)
    assert (model.learning_rate, model.noise, model.n_actions) == (1e-2, 0.1, 2)
