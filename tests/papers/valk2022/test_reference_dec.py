"""Valk's decision calibration as his code runs it (`calbench.papers.valk2022.reference_dec`)
against his procedure written out here as his code is written (msc-knn-cal
helpers/dec_cal.py: torch autograd, torch.optim.Adam, StepLR, clamping), fed the same
draws: calbench draws the initial weights and the noise from numpy's generator, his code
from torch's global one, so the written-out critic takes them as given."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from calbench.calibrators import make_calibrator
from calbench.papers.valk2022.reference_dec import ValkDecisionCalibration, train_critic
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


def _critic_as_one_expression_a_step(
    probs, labels_onehot, rng, *, epochs, steps, lr, noise, n_actions
):
    """`train_critic` as it was written before its buffers (one expression per quantity,
    the noise drawn step by step): its float32 operations are the reference the buffered
    loop must reproduce bit for bit."""
    n, k = probs.shape
    f32 = np.float32
    weight = ((rng.random((n_actions, k), dtype=f32) * 2 - 1) * f32(1.0 / np.sqrt(k))).astype(f32)
    probs_t = np.ascontiguousarray(probs.T, dtype=f32)
    residual_t = np.ascontiguousarray((labels_onehot - probs).T, dtype=f32)
    first, second = np.zeros_like(weight), np.zeros_like(weight)
    t = 0
    for epoch in range(epochs):
        rate = lr * 0.8 ** (epoch // 50)
        for _ in range(steps):
            scores = weight @ probs_t
            if n_actions == 2:
                scores[0] += rng.standard_normal(n, dtype=f32) * f32(noise * np.sqrt(2))
            else:
                scores += rng.standard_normal(scores.shape, dtype=f32) * f32(noise)
            scores -= scores.max(axis=0)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=0)
            violation = scores @ residual_t.T / f32(n)
            norms = np.sqrt((violation * violation).sum(axis=1, keepdims=True))
            d_scores = -((violation / norms) @ residual_t) / f32(n)
            d_scores = scores * (d_scores - (scores * d_scores).sum(axis=0))
            grad = d_scores @ probs_t.T
            t += 1
            first = f32(0.9) * first + f32(0.1) * grad
            second = f32(0.999) * second + f32(0.001) * grad * grad
            denom = np.sqrt(second) / f32(np.sqrt(1 - 0.999**t)) + f32(1e-8)
            weight = weight - f32(rate / (1 - 0.9**t)) * first / denom
    action = weight @ probs_t
    action = np.exp(action - action.max(axis=0))
    action /= action.sum(axis=0)
    adjustment = np.linalg.inv(action @ action.T) @ (action @ residual_t.T)
    return weight, adjustment.astype(f32)


@pytest.mark.parametrize(("n", "k", "n_actions"), [(500, 10, 2), (300, 100, 2), (400, 6, 3)])
def test_critic_is_its_one_expression_loop_bit_for_bit(n, k, n_actions):
    # Across StepLR's first step (epoch 50), at 10 and 100 classes and with a third action
    # (noise on every score): weights, adjustment and the generator's state all equal.
    rng = np.random.default_rng(k)
    logits = rng.normal(size=(n, k)) * 3
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = (probs / probs.sum(axis=1, keepdims=True)).astype(np.float32)
    labels = np.eye(k, dtype=np.float32)[rng.integers(0, k, n)]
    settings = {"epochs": 52, "steps": 3, "lr": 1e-2, "noise": 0.1, "n_actions": n_actions}
    mine_rng, reference_rng = np.random.default_rng(7), np.random.default_rng(7)
    mine = train_critic(probs, labels, mine_rng, **settings)
    reference = _critic_as_one_expression_a_step(probs, labels, reference_rng, **settings)
    assert mine[0].dtype == mine[1].dtype == np.float32
    np.testing.assert_array_equal(mine[0], reference[0])
    np.testing.assert_array_equal(mine[1], reference[1])
    assert mine_rng.bit_generator.state == reference_rng.bit_generator.state
    assert np.abs(mine[0]).max() > 1.0 / np.sqrt(k)  # trained away from its initial bound
