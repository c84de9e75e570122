r"""Intra order-preserving calibration maps on logits (Rahimi et al. 2020; Valk 2.5.5).

A map f is intra order-preserving when ``argsort f(z) = argsort z``: accuracy is kept.

- ``iop_full``: with the logits sorted decreasingly :math:`s_1 \ge \dots \ge s_k`,
  :math:`u = (1, s_{k-1} - s_k, \dots, s_1 - s_2)` and :math:`m = g(z)` from a network with
  two hidden layers, :math:`m_1 = 0`, :math:`m_{j>1} = \mathrm{softplus}(g_j(z))`, the sorted
  output is the reversed cumulative sum of :math:`u \odot m`, unsorted back. Non-negative
  increments keep the order; a tie in z gives a zero increment, so f is continuous
  (Rahimi et al.'s construction).
- ``iop_diag``: one increasing function applied to every logit,
  :math:`f(z) = (\phi(z_1), \dots, \phi(z_k))`. Rahimi et al. build :math:`\phi` as the
  integral of a positive network (UMNN); here :math:`\phi` is a two-hidden-layer network with
  positive weights (softplus of free parameters) and increasing activations, another
  parametrisation of increasing continuous functions that needs no quadrature.

Both are fitted on the log-loss by full-batch L-BFGS in float64 (torch), from a seeded start.
"""

from __future__ import annotations

import numpy as np

from calbench.calibrators.bounds import PseudoCountBound
from calbench.calibrators.constraints import Choice
from calbench.device import resolve_device
from calbench.errors import check_int
from calbench.lazy import LazyModule

torch = LazyModule("torch")
F = LazyModule("torch.nn.functional")


def _layer(gen, n_in, n_out):
    bound = 1.0 / np.sqrt(n_in)
    w = (torch.rand(n_out, n_in, generator=gen, dtype=torch.float64) * 2 - 1) * bound
    b = (torch.rand(n_out, generator=gen, dtype=torch.float64) * 2 - 1) * bound
    return [w.requires_grad_(True), b.requires_grad_(True)]


class OrderPreservingCalibrator(PseudoCountBound):
    """Parameters
    ----------
    family : {"full", "diagonal"}
    hidden : tuple of two ints
        Sizes of the two hidden layers (Valk used 40 and 40 on the synthetic data).
    weight_decay : float
        L2 penalty on the network's weights, added to the mean log-loss (Rahimi et al.
        regularise the same way; without it 40 x 40 units overfit 5000 samples).
    max_iter : int
        L-BFGS iterations.
    random_state : int
    device : str
        Where the network is fitted: ``cpu``, ``cuda`` (CPU with a warning when no GPU is
        present) or ``auto``; initialised on the CPU either way.
    pseudo_count : float
        Smooth the predictions as if this many evenly labelled samples were added to the
        calibration set (`calbench.calibrators.bounds`): at 0 (the published map) the
        network's unbounded outputs reach a softmax of exactly 0 or 1 (DenseNet-40
        CIFAR-10, full family: 4824 test rows at 1, 28 of them wrong); the methods
        ``iop_full`` uses 1, Valk's ``iop_full_plain`` and ``iop_diag`` 0.
    """

    run_inputs = ("device",)

    _parameter_constraints = {
        "family": Choice("full", "diagonal"),
    }

    def __init__(
        self,
        family="full",
        hidden=(40, 40),
        weight_decay=1e-3,
        max_iter=500,
        random_state=0,
        device="cpu",
        pseudo_count=0.0,
    ):
        self.family = family
        self.hidden = hidden
        self.weight_decay = weight_decay
        self.max_iter = max_iter
        self.random_state = random_state
        self.device = device
        self.pseudo_count = pseudo_count

    def _forward(self, params, z):
        if self.family == "diagonal":
            (w1, b1), (w2, b2), (w3, b3) = params
            x = z.reshape(-1, 1)
            x = torch.tanh(x @ F.softplus(w1).T + b1)
            x = torch.tanh(x @ F.softplus(w2).T + b2)
            return (x @ F.softplus(w3).T + b3).reshape(z.shape)
        (w1, b1), (w2, b2), (w3, b3) = params
        sorted_z, order = torch.sort(z, dim=1, descending=True)
        gaps = sorted_z[:, :-1] - sorted_z[:, 1:]
        u = torch.cat([gaps, torch.ones_like(gaps[:, :1])], dim=1).flip(1)
        hidden = torch.relu(z @ w1.T + b1)
        hidden = torch.relu(hidden @ w2.T + b2)
        g = hidden @ w3.T + b3
        m = torch.cat([torch.zeros_like(g[:, :1]), F.softplus(g[:, 1:])], dim=1)
        out_sorted = torch.cumsum(u * m, dim=1).flip(1)
        return torch.empty_like(out_sorted).scatter_(1, order, out_sorted)

    def _fit(self, logits, y):
        h1, h2 = (check_int(h, "hidden", "iop") for h in self.hidden)
        k = logits.shape[1]
        gen = torch.Generator().manual_seed(int(self.random_state))
        n_in, n_out = (1, 1) if self.family == "diagonal" else (k, k)
        device = resolve_device(self.device)
        params = [_layer(gen, n_in, h1), _layer(gen, h1, h2), _layer(gen, h2, n_out)]
        params = [[p.detach().to(device).requires_grad_(True) for p in layer] for layer in params]
        flat = [p for layer in params for p in layer]
        z = torch.from_numpy(logits).to(device)
        target = torch.from_numpy(y).to(device)
        optimiser = torch.optim.LBFGS(
            flat,
            max_iter=int(self.max_iter),
            history_size=20,
            line_search_fn="strong_wolfe",
            tolerance_grad=1e-7,
            tolerance_change=1e-10,
        )

        def closure():
            optimiser.zero_grad()
            loss = F.cross_entropy(self._forward(params, z), target)
            loss = loss + self.weight_decay * sum((w**2).sum() for w, _ in params)
            loss.backward()
            return loss

        optimiser.step(closure)
        self.params_ = [[p.detach().cpu().numpy().copy() for p in layer] for layer in params]

    def _predict_proba(self, logits):
        params = [[torch.from_numpy(p) for p in layer] for layer in self.params_]
        with torch.no_grad():
            out = self._forward(params, torch.from_numpy(logits))
        return torch.softmax(out, dim=1).numpy()


#: The calibrators this module registers: name -> (class, the parameters the name fixes).
REGISTERED = {
    "iop_full": (OrderPreservingCalibrator, {"family": "full"}),
    "iop_diag": (OrderPreservingCalibrator, {"family": "diagonal"}),
}
