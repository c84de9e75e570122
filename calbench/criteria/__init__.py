"""Criteria a parametric calibration map is fitted to minimise.

A criterion is ``f(logits, y) -> (value, gradient)``: the loss of the calibrated logits of
the calibration samples and its gradient with respect to those logits, ndarray of shape
(n_samples, n_classes). The map then applies its own chain rule. ``nll`` is in closed
form; criteria written in torch get their gradient from autograd through `from_torch`.
Registered by name once.
"""

from __future__ import annotations

import numpy as np

from calbench.criteria import decision_aware
from calbench.criteria.decision_aware import TRAINED_PER_EPS, decision_criterion  # noqa: F401
from calbench.device import resolve_device
from calbench.errors import CalbenchError, unknown_name
from calbench.lazy import LazyModule
from calbench.simplex import EXP_FLOOR, TINY, fitting_softmax

torch = LazyModule("torch")


def nll(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean negative log-likelihood (log-loss) and its gradient ``(softmax - onehot) / n``."""
    n = len(y)
    rows = np.arange(n)
    fused = fitting_softmax(logits, y) if logits.dtype == np.float64 else None
    if fused is not None:
        value, grad = fused
        grad[rows, y] -= 1.0
        grad /= n
        return value, grad
    shifted = logits - logits.max(axis=1, keepdims=True)
    label_logit = shifted[rows, y]
    np.maximum(shifted, EXP_FLOOR, out=shifted)  # no subnormals (`EXP_FLOOR`)
    grad = np.exp(shifted, out=shifted)
    norm = grad.sum(axis=1)
    value = float((np.log(norm) - label_logit).mean())
    grad /= norm[:, None]
    grad[rows, y] -= 1.0
    grad /= n
    return value, grad


def mse(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean squared error of the probabilities over all n x k entries (Brier / k), as
    Zhang et al. (Mix-n-Match) fit temperatures and ensemble weights; its gradient through
    the softmax Jacobian."""
    n, k = logits.shape
    probs = logits - logits.max(axis=1, keepdims=True)
    np.maximum(probs, EXP_FLOOR, out=probs)
    np.exp(probs, out=probs)
    probs /= probs.sum(axis=1, keepdims=True)
    # Three (n, k) arrays, each operation as the out-of-place form rounds it (the same bits):
    # an ETS fit at 5000 x 100 spends most of its time here.
    g = probs.copy()
    g[np.arange(n), y] -= 1.0
    scratch = np.square(g)
    value = float(scratch.mean())
    np.multiply(g, 2.0, out=g)
    g /= n * k
    np.multiply(g, probs, out=scratch)
    g -= scratch.sum(axis=1, keepdims=True)
    np.multiply(probs, g, out=g)
    return value, g


def top_label_bce(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Binary cross-entropy of the top-label confidence ``q = max softmax(z)`` against
    ``c = 1[argmax z = y]``: the top-versus-all criterion of Le Coz et al. (NeurIPS 2024),
    their ``binary_cross_entropy(confidence, correct)`` for TS_tva / VS_tva / Dir-ODIR_tva.

    With ``e_j = exp(z_j - z_top)`` and ``R = sum_{j != top} e_j``: ``log q = -log(1 + R)``
    and ``log(1 - q) = log R - log(1 + R)``, so neither side cancels when ``q`` is near 1.
    The gradient is ``(-c + (1 - c) / R) (onehot(top) - p) / n``; like their ``torch.max``
    it treats the arg max as fixed (it is piecewise constant in the logits).
    """
    n = len(y)
    rows = np.arange(n)
    top = logits.argmax(axis=1)
    shifted = logits - logits[rows, top][:, None]
    np.maximum(shifted, EXP_FLOOR, out=shifted)
    e = np.exp(shifted, out=shifted)
    e[rows, top] = 0.0
    rest = np.maximum(e.sum(axis=1), TINY)
    correct = (top == y).astype(np.float64)
    log_norm = np.log1p(rest)
    value = float((correct * log_norm - (1.0 - correct) * (np.log(rest) - log_norm)).mean())
    probs = e / (1.0 + rest)[:, None]
    probs[rows, top] = 1.0 / (1.0 + rest)
    weight = (-correct + (1.0 - correct) / rest) / n
    grad = -weight[:, None] * probs
    grad[rows, top] += weight
    return value, grad


def from_torch(loss_fn, device=None):
    """Wrap ``loss_fn(logits: Tensor, y: Tensor) -> scalar Tensor`` as a criterion computed
    on ``device`` (see `calbench.device.resolve_device`)."""
    device = resolve_device(device)

    def criterion(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        out = torch.from_numpy(logits).to(device).requires_grad_(True)
        value = loss_fn(out, torch.from_numpy(y).to(device))
        value.backward()
        return float(value.detach()), out.grad.cpu().numpy()

    criterion.__doc__ = loss_fn.__doc__
    return criterion


CRITERIA = {"nll": nll, "mse": mse, "top_label_bce": top_label_bce}
#: Criteria with options (loss matrices, lambda, beta), built per fit: name -> torch loss.
PARAMETRISED = {
    "ece": decision_aware.ece_loss,
    "direct": decision_aware.direct_loss,
    "integral": decision_aware.integral_loss,
    "integral_01_reject": decision_aware.integral_loss_01_reject,
}


#: Options a parametrised criterion cannot go without.
_REQUIRED = {"direct": ("loss_matrix",), "integral": ("l0", "l1")}


def get_criterion(spec):
    """The criterion ``spec`` names: a registered name, or ``{"name": ..., **options}`` for
    the decision criteria (``direct``: loss_matrix, reg_lambda, beta; ``integral``: l0, l1),
    where torch-written ones also take a ``device``."""
    options = dict(spec) if isinstance(spec, dict) else {"name": spec}
    name = options.pop("name", None)
    device = options.pop("device", None)
    if name in CRITERIA:
        return CRITERIA[name]
    if name not in PARAMETRISED:
        raise unknown_name("criterion", name, [*CRITERIA, *PARAMETRISED])
    if any(key not in options for key in _REQUIRED.get(name, ())):
        raise CalbenchError(
            f"criterion {name!r} needs its options (a loss matrix); see conf/criterion."
        )
    if name == "integral":
        options["l0"], options["l1"] = decision_aware.check_family(
            options["l0"], options["l1"], "criterion integral"
        )
    fn = PARAMETRISED[name]
    criterion = from_torch(lambda logits, y: fn(logits, y, **options), device)
    criterion.smooth = False  # piecewise in the logits: see ParametricCalibrator._fit
    return criterion
