"""Decision-aware criteria of Ho ch. 3: Direct Loss and Integral Loss.

Both are written in torch on the calibrated logits and differentiated by autograd (the
maps' chain rule takes it from there, see `calbench.criteria.from_torch`). All are means
over the calibration samples (Ho writes sums; the minimiser is the same).

- ``direct_loss`` (eq. 3.7): ``-1/lambda [min_d (p L)_d - min_d ((p L)_d + lambda L[y, d])]``.
  With lambda < 0 and no smoothing it bounds the empirical risk from above (Theorem 1); the
  smooth minimum ``-1/beta log sum exp(-beta x)`` gives gradients on the flat parts.
- ``integral_loss_01_reject`` (eq. 3.18): the empirical risk of the 0/1 loss with a reject
  option integrated over the reject cost eps in [0, 1], in closed form.
- ``integral_loss`` (eqs. 3.19-3.34): the same integral for any family ``l0 + eps l1`` with
  non-negative costs: for each action d the interval [LB(d), UB(d)] of eps where d is the
  Bayes decision follows from linear inequalities in eps, and the integral of the cost
  ``l0[y, d] + eps l1[y, d]`` over it is exact. O(|Y| |A|^2) per sample, vectorised.
"""

from __future__ import annotations

import numpy as np

from calbench.decision.family import LossFamily, between, configured_loss
from calbench.errors import CalbenchError
from calbench.lazy import LazyModule

torch = LazyModule("torch")


def _soft_min(x: torch.Tensor, beta: float | None) -> torch.Tensor:
    if beta is None:
        return x.min(dim=1).values
    return -torch.logsumexp(-beta * x, dim=1) / beta


def direct_loss(logits, y, loss_matrix, reg_lambda=-1.0, beta=None):
    """Ho eq. 3.7 (mean over samples)."""
    if reg_lambda == 0:
        raise CalbenchError("direct loss: lambda must be non-zero (Ho 3.3 uses lambda < 0).")
    loss = torch.as_tensor(loss_matrix, dtype=logits.dtype, device=logits.device)
    expected = torch.softmax(logits, dim=1) @ loss  # (n, actions)
    nudged = expected + reg_lambda * loss[y]
    return -(_soft_min(expected, beta) - _soft_min(nudged, beta)).mean() / reg_lambda


def ece_loss(logits, y, n_bins=15):
    """Confidence-ECE (equal-width bins) as Ho trains on it: the bin of each sample is fixed
    at the current map (piecewise constant), the gaps between mean confidence and accuracy
    are differentiable in the confidences."""
    confidence, predicted = torch.softmax(logits, dim=1).max(dim=1)
    correct = (predicted == y).to(logits.dtype)
    bins = torch.clamp((confidence.detach() * n_bins).long(), max=n_bins - 1)
    gaps = torch.zeros(n_bins, dtype=logits.dtype, device=logits.device).index_add(
        0, bins, confidence - correct
    )
    return gaps.abs().sum() / len(y)


def integral_loss_01_reject(logits, y):
    """Ho eq. 3.18 (mean over samples)."""
    probs = torch.softmax(logits, dim=1)
    top, predicted = probs.max(dim=1)
    wrong = (predicted != y).to(logits.dtype)
    return ((1 - top) ** 2 / 2 + wrong * top).mean()


# Rows per block of the (rows, A, A) comparisons: a block stays in cache.
_ROWS = 256


def _rivals(r0, r1):
    """For each action d: the crossing with the rival that bounds d's eps-interval from
    above and that rival (eq. 3.31), the same from below (eq. 3.32), and whether d can win
    at all (eq. 3.33); inf / -inf where no rival bounds it."""
    a = r0[:, :, None] - r0[:, None, :]  # a[i, d, d'] (eq. 3.23)
    b = r1[:, :, None] - r1[:, None, :]  # b[i, d, d'] (eq. 3.24)
    ratio = -a / torch.where(b == 0, torch.ones_like(b), b)
    upper = ratio.masked_fill(b <= 0, float("inf")).min(dim=2)
    lower = ratio.masked_fill(b >= 0, float("-inf")).max(dim=2)
    valid = ~((b == 0) & (a > 0)).any(dim=2)  # eq. 3.33
    # An action whose expected cost equals an earlier one's for every eps never wins the
    # argmin (first on ties), so its interval is not counted twice.
    earlier = torch.ones(a.shape[1], a.shape[1], dtype=torch.bool, device=a.device).tril(-1)
    valid &= ~((a == 0) & (b == 0) & earlier).any(dim=2)
    return upper.values, upper.indices, lower.values, lower.indices, valid


def integral_loss(logits, y, l0, l1):
    """Ho eq. 3.34 for ``l_eps = l0 + eps l1``, eps uniform on [0, 1] (mean over samples)."""
    l0 = torch.as_tensor(l0, dtype=logits.dtype, device=logits.device)
    l1 = torch.as_tensor(l1, dtype=logits.dtype, device=logits.device)
    probs = torch.softmax(logits, dim=1)
    r0, r1 = probs @ l0, probs @ l1  # (n, A): expected costs at eps = 0 and their slopes
    # Which rival d' bounds each action's interval is found without the autograd graph
    # (the (n, A, A) comparisons dominate the cost); the bounds themselves are then
    # recomputed from the chosen rivals with gradients, which is the gradient of the min /
    # max over all rivals (it flows to the arg-min / arg-max).
    with torch.no_grad():
        blocks = [_rivals(r0[i : i + _ROWS], r1[i : i + _ROWS]) for i in range(0, len(r0), _ROWS)]
        up, up_rival, low, low_rival, valid = (torch.cat(p) for p in zip(*blocks, strict=True))

    def bound(found, rival, missing):
        a = r0 - r0.gather(1, rival)
        b = r1 - r1.gather(1, rival)
        crossing = -a / torch.where(b == 0, torch.ones_like(b), b)
        return torch.where(torch.isfinite(found), crossing, missing).clamp(0, 1)

    upper, lower = bound(up, up_rival, 1.0), bound(low, low_rival, 0.0)
    width = (upper - lower).clamp(min=0) * valid
    half_squares = ((upper**2 - lower**2) / 2).clamp(min=0) * valid
    return ((l0[y] * width) + (l1[y] * half_squares)).sum(dim=1).mean()


def check_family(l0, l1, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``l0`` and ``l1`` of one shape with ``l0 + eps l1 >= 0`` on [0, 1] (Ho 3.4.2 assumes
    non-negative losses; by linearity the two ends suffice)."""
    l0, l1 = np.asarray(l0, dtype=np.float64), np.asarray(l1, dtype=np.float64)
    if l0.shape != l1.shape or l0.ndim != 2:
        raise CalbenchError(
            f"{where}: l0 {l0.shape} and l1 {l1.shape} must be equal-shaped matrices."
        )
    if (l0 < 0).any() or (l0 + l1 < 0).any():
        raise CalbenchError(
            f"{where}: the loss family has negative costs at eps = 0 or 1; the Integral Loss "
            "assumes non-negative losses (add a constant to each row: decisions stay the same)."
        )
    return l0, l1


#: Criteria trained knowing the eps of a loss family (Ho 4.4): a risk curve refits them
#: at each eps it reports, where other maps are fitted once and scored along the curve.
TRAINED_PER_EPS = ("direct",)


def decision_criterion(
    name: str, options: dict, training_loss, family: LossFamily | None, n_classes: int
) -> dict:
    """The spec of a decision criterion for one fit (`calbench.criteria.get_criterion`).

    ``direct`` is trained on ``training_loss`` (the run's loss, at the fit's eps in a
    family). ``integral`` is trained on a family: the one between its own ``eps0`` /
    ``eps1`` loss configs, else the run's loss family or prior shift ``family``.
    """
    if name == "direct":
        return {"name": name, "loss_matrix": np.asarray(training_loss).tolist(), **options}
    ends = [options.get(k) for k in ("eps0", "eps1")]
    if all(end is not None for end in ends):
        family = between(*(configured_loss(end, n_classes)[0] for end in ends))
    elif family is None:
        raise CalbenchError(
            "criterion integral needs a loss family: run it with a family loss (e.g. "
            "loss=reject_cost_family) or a shift (shift=lt_k1), or give criterion.eps0 and "
            "criterion.eps1 as loss configs."
        )
    return {"name": name, "l0": family.l0.tolist(), "l1": family.l1.tolist()}
