"""Rahimi et al.'s DIAG as their code trains it (`calbench.papers.valk2022.reference_iop`)
against their procedure written out here as their code is written
(AmirooR/IntraOrderPreservingCalibration: models/UMNN, models/monotonic_model.py, builder.py,
calibrate.py): the UMNN with its own backward, torch's global generator seeded with 1357,
KFold on a RandomState, DataLoaders with shuffling, and the L-BFGS closure that never zeroes
its gradients."""

import math

import numpy as np
import pytest
import torch
from sklearn.model_selection import KFold
from torch import nn

from calbench.papers.valk2022.reference_iop import RahimiDiagonal, clenshaw_curtis

#: Rahimi et al.'s DIAG for contract tests on small sets (2000 L-BFGS iterations over 51
#: quadrature nodes by default).
SMALL_IOP = {"nb_steps": 10, "max_iter": 30}


def _compute_cc_weights(nb_steps):
    lam = np.arange(0, nb_steps + 1, 1).reshape(-1, 1)
    lam = np.cos((lam @ lam.T) * math.pi / nb_steps)
    lam[:, 0] = 0.5
    lam[:, -1] = 0.5 * lam[:, -1]
    lam = lam * 2 / nb_steps
    W = np.arange(0, nb_steps + 1, 1).reshape(-1, 1)
    W[np.arange(1, nb_steps + 1, 2)] = 0
    W = 2 / (1 - W**2)
    W[0] = 1
    W[np.arange(1, nb_steps + 1, 2)] = 0
    cc_weights = torch.tensor(lam.T @ W).float()
    steps = torch.tensor(
        np.cos(np.arange(0, nb_steps + 1, 1).reshape(-1, 1) * math.pi / nb_steps)
    ).float()
    return cc_weights, steps


def _flatten(sequence):
    return torch.cat([p.contiguous().view(-1) for p in sequence])


def _integrate(x0, nb_steps, step_sizes, integrand, h, compute_grad=False, x_tot=None):
    cc_weights, steps = _compute_cc_weights(nb_steps)
    xT = x0 + nb_steps * step_sizes
    x0_t = x0.unsqueeze(1).expand(-1, nb_steps + 1, -1)
    xT_t = xT.unsqueeze(1).expand(-1, nb_steps + 1, -1)
    h_steps = h.unsqueeze(1).expand(-1, nb_steps + 1, -1)
    steps_t = steps.unsqueeze(0).expand(x0_t.shape[0], -1, x0_t.shape[2])
    X_steps = x0_t + (xT_t - x0_t) * (steps_t + 1) / 2
    X_steps = X_steps.contiguous().view(-1, x0_t.shape[2])
    h_steps = h_steps.contiguous().view(-1, h.shape[1])
    if not compute_grad:
        dzs = integrand(X_steps, h_steps)
        dzs = dzs.view(xT_t.shape[0], nb_steps + 1, -1)
        dzs = dzs * cc_weights.unsqueeze(0).expand(dzs.shape)
        return dzs.sum(1) * (xT - x0) / 2
    x_tot = x_tot * (xT - x0) / 2
    x_tot_steps = x_tot.unsqueeze(1).expand(-1, nb_steps + 1, -1) * cc_weights.unsqueeze(0).expand(
        x_tot.shape[0], -1, x_tot.shape[1]
    )
    x_tot_steps = x_tot_steps.contiguous().view(-1, x_tot.shape[1])
    h_steps.requires_grad_(True)
    with torch.enable_grad():
        f = integrand.forward(X_steps, h_steps)
        g_param = _flatten(
            torch.autograd.grad(f, integrand.parameters(), x_tot_steps, retain_graph=True)
        )
        g_h = _flatten(torch.autograd.grad(f, h_steps, x_tot_steps))
    return g_param, g_h.view(int(X_steps.shape[0] / (nb_steps + 1)), nb_steps + 1, -1).sum(1)


class _ParallelNeuralIntegral(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x0, x, integrand, flat_params, h, nb_steps=20):
        with torch.no_grad():
            x_tot = _integrate(x0, nb_steps, (x - x0) / nb_steps, integrand, h, False)
            ctx.integrand = integrand
            ctx.nb_steps = nb_steps
            ctx.save_for_backward(x0.clone(), x.clone(), h)
        return x_tot

    @staticmethod
    def backward(ctx, grad_output):
        x0, x, h = ctx.saved_tensors
        integrand, nb_steps = ctx.integrand, ctx.nb_steps
        integrand_grad, h_grad = _integrate(
            x0, nb_steps, x / nb_steps, integrand, h, True, grad_output
        )
        x_grad = integrand(x, h)
        x0_grad = integrand(x0, h)
        return (
            -x0_grad * grad_output,
            x_grad * grad_output,
            None,
            integrand_grad,
            h_grad.view(h.shape),
            None,
        )


class _IntegrandNN(nn.Module):
    def __init__(self, in_d, hidden_layers):
        super().__init__()
        self.net = []
        hs = [in_d] + hidden_layers + [1]
        for h0, h1 in zip(hs, hs[1:], strict=False):
            self.net.extend([nn.Linear(h0, h1), nn.ReLU()])
        self.net.pop()
        self.net.append(nn.ELU())
        self.net = nn.Sequential(*self.net)

    def forward(self, x, h):
        return self.net(torch.cat((x, h), 1)) + 1.0 + 1e-8


class _MonotonicNN(nn.Module):
    def __init__(self, in_d, hidden_layers, nb_steps=50):
        super().__init__()
        self.integrand = _IntegrandNN(2, hidden_layers)
        self.net = []
        hs = [in_d - 1] + hidden_layers + [2]
        for h0, h1 in zip(hs, hs[1:], strict=False):
            self.net.extend([nn.Linear(h0, h1), nn.ReLU()])
        self.net.pop()
        self.net = nn.Sequential(*self.net)
        self.nb_steps = nb_steps

    def forward(self, x, h):
        x0 = torch.zeros(x.shape)
        out = self.net(h)
        offset = out[:, [0]]
        scaling = 1
        integrated = _ParallelNeuralIntegral.apply(
            x0, x, self.integrand, _flatten(self.integrand.parameters()), torch.zeros_like(x),
            self.nb_steps,
        )  # fmt: skip
        return scaling * integrated + offset


class _MonotonicModel(nn.Module):
    def __init__(self, num_hiddens, nb_steps):
        super().__init__()
        self.model_monotonic = _MonotonicNN(2, num_hiddens, nb_steps=nb_steps)

    def forward(self, logits):
        flat_out = logits.contiguous().view(-1).unsqueeze(1)
        h = torch.zeros_like(flat_out)
        return self.model_monotonic(flat_out, h).contiguous().view(logits.shape)


def _rahimi_calibrate(logits_val, y_val, logits_test, hidden, nb_steps, max_iter):
    """calibrate.py's __main__ with config DIAG (LBFGS, one epoch, 5 folds), then
    evaluate.py's per-fold scores on the test set: one score array per fold."""
    torch.manual_seed(1357)
    rng = np.random.RandomState(1357)  # utils.get_rng() after fix_rng_seed(1357)
    y_val = y_val[..., None]
    kf = KFold(n_splits=5, shuffle=True, random_state=rng)
    loaders = []
    for train_indices, test_indices in kf.split(logits_val):
        train = torch.utils.data.TensorDataset(
            torch.tensor(logits_val[train_indices]), torch.tensor(y_val[train_indices])
        )
        test = torch.utils.data.TensorDataset(
            torch.tensor(logits_val[test_indices]), torch.tensor(y_val[test_indices])
        )
        loaders.append(
            (
                torch.utils.data.DataLoader(train, batch_size=256, shuffle=True),
                torch.utils.data.DataLoader(test, batch_size=256, shuffle=False),
            )
        )
    scores = []
    for train_loader, test_loader in loaders:
        model = _MonotonicModel(hidden, nb_steps)
        optimizer = torch.optim.LBFGS(
            model.parameters(), line_search_fn="strong_wolfe", max_iter=max_iter, lr=0.1
        )
        loss_fn = nn.CrossEntropyLoss()
        batches = list(train_loader)  # calibrate_fullgrad: one pass, concatenated
        logits = torch.cat([batch for batch, _ in batches])
        labels = torch.cat([labels for _, labels in batches])

        def closure():
            loss = loss_fn(model(logits), labels[:, 0].long())  # noqa: B023
            loss.backward()
            return loss

        optimizer.zero_grad()
        optimizer.step(closure)
        for _ in test_loader:  # evaluate() on the fold's held-out part
            pass
        with torch.no_grad():
            scores.append(model(torch.tensor(logits_test)).numpy())
    return scores


def _softmax(x):
    e_x = np.exp(x - np.max(x))
    return e_x / e_x.sum(axis=1, keepdims=1)


def test_quadrature_is_theirs():
    for steps in (4, 50):
        ours, theirs = clenshaw_curtis(steps), _compute_cc_weights(steps)
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("fold", [1, 3, 5])
def test_diag_follows_rahimis_code(fold):
    """Each fold's model and its scores, with the folds before it run first as their loop
    runs them; small network sizes and few iterations keep it quick."""
    rng = np.random.default_rng(3)
    n_classes = 4
    logits = (rng.normal(size=(300, n_classes)) * 3).astype(np.float32)
    y = rng.integers(0, n_classes, 300)
    test = (rng.normal(size=(50, n_classes)) * 3).astype(np.float32)
    settings = {"hidden": [2, 2], "nb_steps": 10, "max_iter": 30}
    theirs = _rahimi_calibrate(logits, y, test, **settings)[fold - 1]
    calibrator = RahimiDiagonal(fold=fold, **settings).fit(logits.astype(np.float64), y)
    with torch.no_grad():
        ours = calibrator.model_(torch.from_numpy(test)).numpy()
    np.testing.assert_array_equal(ours, theirs)
    # Their float32 rows, renormalised in float64 (rows off 1 by up to about 1e-7).
    np.testing.assert_allclose(
        calibrator.predict_proba(test.astype(np.float64)), _softmax(theirs), rtol=3e-7
    )
