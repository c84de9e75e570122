"""Kull et al.'s Keras calibration networks, trained as Keras 2.2 trains them.

Kull et al.'s deep-net experiments (experiments_dnn, ``scripts/calibration/cal_methods.py``)
fit VecS (``VectorScaling_NN``), Dir-L2, Dir-ODIR and MS-ODIR (``Dirichlet_NN``) as one
Keras layer trained with Adam, not to the optimum. calbench's ``vs``, ``ms_odir`` and
``dir_*`` fit the same objectives to the optimum; this module follows the reference
procedure step by step, so that a published number can be checked against what that
procedure gives rather than against a guess about it:

- float32 throughout; the Dirichlet input is ``log(clip(p, 2.2e-16, 1 - 2.2e-16))`` of
  their numpy softmax, which subtracts the largest logit of the whole array, not of each
  row; MS-ODIR and VecS read the logits;
- the loss is Keras 2.2's ``sparse_categorical_crossentropy`` on the softmax output:
  ``-log(clip(p_y, 1e-7, 1 - 1e-7) / sum_j clip(p_j, 1e-7, 1 - 1e-7))``, whose gradient
  vanishes where the clip binds (``loss_clip=None``: the exact log-loss from the layer's
  logits instead, as Keras 2.3 on and TensorFlow 2's Keras compute it for a softmax output:
  Gupta's and Valk's runs);
- the penalty is added to each batch's mean loss unscaled: ``l2 * sum_{i != j} W_ij^2``
  (ODIR) or ``l2 * sum W_ij^2`` (L2) on the kernel, ``mu * sum b_j^2`` on the bias; note
  that calbench's ``reg_lambda`` and ``reg_mu`` divide by ``k(k-1)`` and ``k`` instead;
- Adam as Keras 2.2 writes it (``lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)``,
  ``p -= lr_t m / (sqrt(v) + 1e-7)``), batches of 128 drawn from a permutation per epoch
  by numpy's generator seeded with ``seed`` (``np.random.seed(15)`` in their constructors),
  early stopping on the epoch's mean training loss (patience 15, at most 500 epochs, the
  last weights kept), and for ``Dirichlet_NN`` a second fit from those weights with a
  fresh Adam at a tenth of the learning rate (their ``-d`` flag), whose permutations go on
  from the first fit's generator.

TensorFlow's float32 kernels sum in another order than torch's, so a run with the
reference's seed is one draw of the procedure, not its bits; the spread over seeds says
how far the procedure itself moves a number. A grid of penalties trains as one batch of
models (`fit_grid`), which inner CV over Kull's 432-point grids needs.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import (
    COUNT,
    NON_NEGATIVE,
    POSITIVE,
    AutoOr,
    Choice,
    Flag,
    NoneOr,
    Number,
)
from calbench.lazy import LazyModule
from calbench.papers.kull2019.keras_batches import Permutations, Rows
from calbench.simplex import global_max_softmax, softmax

torch = LazyModule("torch")

#: Keras 2.2's ``K.epsilon()``: Adam's epsilon and the loss's clip.
KERAS_EPSILON = 1e-7
_BETA_1, _BETA_2 = 0.9, 0.999


def reference_softmax(logits: np.ndarray) -> np.ndarray:
    """experiments_dnn's ``softmax``: float32, minus the largest logit of the whole array
    (rows far below it can underflow to 0, which the Dirichlet input's clip then catches)."""
    return global_max_softmax(np.asarray(logits, dtype=np.float32))


@contextmanager
def _one_thread():
    """Torch on one thread, in inference mode: a step is a few small products, and waking a
    second thread for each cost more than it saved (2.3 ms against 1.0 ms a step for VecS
    at 5000 x 10); no tensor needs autograd, whose bookkeeping per operation cost 15-25%
    of a fit (Valk's MS-ODIR seed; same bits)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            yield
    finally:
        torch.set_num_threads(before)


class KerasStyleScaling(Calibrator):
    """A Keras-trained linear calibration layer, as Kull et al.'s deep-net experiments.

    ``structure="vector"`` is their ``VectorScaling_NN`` (``softmax(w * z + b)``, no
    penalty, one fit); ``structure="matrix"`` their ``Dirichlet_NN`` (``softmax(W x + b)``
    from the identity, with ``x`` the logits for MS-ODIR or ``log p`` for Dirichlet). The
    module docstring lists every step of the training that is followed.

    Parameters
    ----------
    structure : {"matrix", "vector"}
    input_space : {"logits", "probabilities"}
        What the layer reads: the logits (VecS, MS-ODIR) or the log of their reference
        softmax (Dir-L2, Dir-ODIR).
    regularization : {"odir", "l2", "none"}
        ODIR penalises the off-diagonal weights, L2 every weight, each with ``l2``; both
        penalise the bias with ``mu``.
    l2 : float
        Kernel penalty per squared weight, unscaled (Keras units).
    mu : float or "auto"
        Bias penalty per squared intercept; ``"auto"`` (as their ``mu=None``): equal to
        ``l2``.
    lr : float
        Adam's learning rate (of the first fit).
    batch_size, max_epochs, patience : int
        Keras's minibatch size, epoch limit and early-stopping patience (on the epoch's
        mean training loss, penalty included).
    double_fit : bool
        Fit again from the result with a fresh Adam at ``lr / 10`` (``Dirichlet_NN``).
    loss_clip : float or None
        Keras 2.2 clips the softmax output to ``[loss_clip, 1 - loss_clip]`` before its
        log; None computes the exact log-loss from the layer's logits.
    seed : int
        Seed of numpy's generator that orders each epoch's batches (theirs: 15).
    """

    _parameter_constraints = {
        "structure": Choice("matrix", "vector"),
        "input_space": Choice("logits", "probabilities"),
        "regularization": Choice("odir", "l2", "none"),
        "l2": NON_NEGATIVE,
        "mu": AutoOr(NON_NEGATIVE),
        "lr": POSITIVE,
        "batch_size": COUNT,
        "max_epochs": COUNT,
        "patience": Number(0, integer=True),
        "double_fit": Flag(),
        "loss_clip": NoneOr(Number(0.0, strict=True)),
    }

    def __init__(
        self,
        structure="matrix",
        input_space="logits",
        regularization="odir",
        l2=0.0,
        mu="auto",
        lr=1e-3,
        batch_size=128,
        max_epochs=500,
        patience=15,
        double_fit=True,
        loss_clip=KERAS_EPSILON,
        seed=15,
    ):
        self.structure = structure
        self.input_space = input_space
        self.regularization = regularization
        self.l2 = l2
        self.mu = mu
        self.lr = lr
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.double_fit = double_fit
        self.loss_clip = loss_clip
        self.seed = seed

    # -- the layer --------------------------------------------------------------------
    def _inputs(self, logits) -> np.ndarray:
        if self.input_space == "logits":
            return np.asarray(logits, dtype=np.float32)
        eps = np.float32(np.finfo(float).eps)  # their _logFunc: K.clip(x, eps, 1 - eps)
        probs = reference_softmax(logits)
        # A row whose every logit lies 88+ below the array's largest is 0 / 0 in theirs (a
        # NaN their run never met): such rows take their own softmax instead.
        lost = ~np.isfinite(probs).all(axis=1)
        if lost.any():
            probs[lost] = softmax(np.asarray(logits, dtype=np.float64)[lost])
        return np.log(np.clip(probs, eps, np.float32(1) - eps))

    def _bias_penalty(self) -> float:
        if self.regularization == "none":
            return 0.0
        # Dirichlet_NN: ``if mu: self.mu = mu else: self.mu = l2``.
        return float(self.l2) if self.mu == "auto" or not self.mu else float(self.mu)

    @staticmethod
    def _outputs(weights, bias, x):
        """Layer logits of every replica: x (R or 1, B, k) -> (R, B, k)."""
        if weights.dim() == 2:  # vector: (R, k)
            return x * weights[:, None, :] + bias[:, None, :]
        return x @ weights.transpose(1, 2) + bias[:, None, :]

    def _loss_and_gradient(self, outputs, onehot):
        """Each replica's mean batch loss (R,) and its gradient in the layer's logits
        (R, B, k), in closed form: autograd's bookkeeping cost more than the arithmetic
        at these sizes, and torch's softmax over a last axis of 10 is slow on CPU."""
        shifted = outputs - outputs.amax(dim=-1, keepdim=True)
        exp = shifted.exp()
        summed = exp.sum(dim=-1, keepdim=True)
        probs = exp / summed
        if self.loss_clip is None:
            log_p = shifted - summed.log()
            loss = -(log_p * onehot).sum(dim=-1)
            grad = probs - onehot
        else:
            # -log(c_y / sum c), c = clip(p): its gradient in p is 1/sum c - 1[j=y]/c_y
            # where the clip does not bind, 0 where it does; then the softmax's chain rule.
            clipped = probs.clamp(self.loss_clip, 1 - self.loss_clip)
            total = clipped.sum(dim=-1, keepdim=True)
            true = (clipped * onehot).sum(dim=-1, keepdim=True)
            loss = (total.log() - true.log()).squeeze(-1)
            free = (probs >= self.loss_clip) & (probs <= 1 - self.loss_clip)
            g = (1 / total - onehot / true) * free
            grad = probs * (g - (probs * g).sum(dim=-1, keepdim=True))
        return loss.mean(dim=1), grad / outputs.shape[1]

    def _penalties(self, l2, mu, k):
        """The live replicas' penalty terms, taken once while the replicas stay: ``l2``,
        ``mu`` (R,), ``2 l2`` and ``2 mu`` shaped for the gradients, and the kernel's mask
        (off-diagonal for ODIR)."""
        mask = torch.ones(k, k)
        if self.regularization == "odir":
            mask = mask - torch.eye(k)
        return l2, mu, 2 * l2[:, None, None], 2 * mu[:, None], mask

    def _penalty(self, weights, bias, terms):
        """(R,) penalties of the replicas' weights, as Keras adds them to each batch, and
        their gradients (``terms``: `_penalties`)."""
        if self.regularization == "none" or self.structure == "vector":
            return torch.zeros(weights.shape[0]), (0, 0)
        l2, mu, twice_l2, twice_mu, mask = terms
        masked = weights * mask
        value = l2 * (masked * weights).sum(dim=(1, 2)) + mu * (bias**2).sum(dim=1)
        return value, (twice_l2 * masked, twice_mu * bias)

    def _gradients(self, params, x, onehot, terms):
        weights, bias = params
        loss, grad_out = self._loss_and_gradient(self._outputs(weights, bias, x), onehot)
        if weights.dim() == 2:
            grads = [(grad_out * x).sum(dim=1), grad_out.sum(dim=1)]
        else:
            grads = [grad_out.transpose(1, 2) @ x, grad_out.sum(dim=1)]
        penalty, penalty_grads = self._penalty(weights, bias, terms)
        return loss + penalty, [g + pg for g, pg in zip(grads, penalty_grads, strict=True)]

    # -- training ---------------------------------------------------------------------
    def _train_stage(self, params, rows, l2, mu, lr, orders_of, offsets):
        """One Keras ``model.fit`` on ``rows`` (`Rows`): Adam from a fresh state, early
        stopping per replica.
        ``orders_of[r]`` are replica r's permutations, read from ``offsets[r]`` on.
        Returns the number of epochs each replica ran.

        A replica that has stopped leaves the batch: each epoch trains only the live ones
        (a grid's strongly penalised points stop within a few dozen epochs while the weak
        ones run on). A replica's numbers do not depend on which others share its batch."""
        n, replicas = rows.n, params[0].shape[0]
        live = torch.arange(replicas)
        current = [p.clone() for p in params]
        moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
        best = torch.full((replicas,), float("inf"))
        wait = torch.zeros(replicas, dtype=torch.long)
        epochs = torch.zeros(replicas, dtype=torch.long)
        terms = self._penalties(l2, mu, params[0].shape[-1])
        # One batch order for all replicas where they share a generator and a position in it.
        shared = len({(id(o), int(f)) for o, f in zip(orders_of, offsets, strict=True)}) == 1
        step = 0
        for epoch in range(self.max_epochs):
            pairs = [(orders_of[r], int(offsets[r])) for r in live[: 1 if shared else None]]
            orders = rows.orders(live, torch.from_numpy(np.stack([o[f + epoch] for o, f in pairs])))
            total = torch.zeros(len(live))
            for start in range(0, n, self.batch_size):
                index = orders[:, start : start + self.batch_size]
                x, onehot = rows.x[index], rows.onehot[index]
                batch_loss, grads = self._gradients(current, x, onehot, terms)
                step += 1
                rate = lr * math.sqrt(1 - _BETA_2**step) / (1 - _BETA_1**step)
                for p, g, (m, v) in zip(current, grads, moments, strict=True):
                    m.mul_(_BETA_1).add_(g, alpha=1 - _BETA_1)
                    v.mul_(_BETA_2).addcmul_(g, g, value=1 - _BETA_2)
                    p.sub_(rate * m / (v.sqrt() + KERAS_EPSILON))
                total += batch_loss * index.shape[1]
            epoch_loss = total / n
            epochs[live] += 1
            improved = epoch_loss < best[live]
            best[live] = torch.where(improved, epoch_loss, best[live])
            wait[live] = torch.where(improved, torch.zeros_like(wait[live]), wait[live] + 1)
            keep = wait[live] < self.patience
            if not keep.all():
                for full, p in zip(params, current, strict=True):
                    full[live] = p
                live = live[keep]
                terms = self._penalties(l2[live], mu[live], params[0].shape[-1])
                current = [p[keep] for p in current]
                moments = [(m[keep], v[keep]) for m, v in moments]
            if not len(live):
                break
        for full, p in zip(params, current, strict=True):
            full[live] = p
        return epochs

    def fit_grid(self, logits, y, points: list[dict]) -> list[KerasStyleScaling]:
        """One fitted copy of this calibrator per point of ``points`` (dicts of ``l2``,
        ``mu``, ``seed``), trained together as one batch of replicas: the same numbers as
        fitting each alone (a test checks it), at a fraction of the cost of separate
        trainings."""
        return self._fit_replicas(logits, y, [slice(None)], points)[0]

    def fit_grid_folds(self, logits, y, folds: list, points: list[dict]) -> list[list]:
        """`fit_grid` on each inner fold's rows (``folds``: index arrays), folds of equal
        size as one batch of replicas: ``[fold][point]``, bit for bit `fit_grid` fold by
        fold (a test checks it), in the Python steps of one fold."""
        out = [None] * len(folds)
        sizes = [len(np.arange(len(y))[f]) for f in folds]
        for size in dict.fromkeys(sizes):
            group = [j for j, s in enumerate(sizes) if s == size]
            fitted = self._fit_replicas(logits, y, [folds[j] for j in group], points)
            for j, models in zip(group, fitted, strict=True):
                out[j] = models
        return out

    def _fit_replicas(self, logits, y, folds: list, points: list[dict]) -> list[list]:
        """``[fold][point]``: a copy per point trained on each fold's rows (folds of one
        size), every (fold, point) a replica of one batch."""
        models = [[self._copy_with(point) for point in points] for _ in folds]
        flat = [model for fold in models for model in fold]
        for model in flat:
            model.validate_params()
        if len({(m.lr, m.double_fit, m.structure, m.input_space) for m in flat}) > 1:
            raise ValueError("fit_grid trains replicas that differ only in l2, mu and seed")
        logits = np.asarray(logits, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64)
        template, k, replicas = flat[0], logits.shape[1], len(flat)
        xs = [torch.from_numpy(template._inputs(logits[f])) for f in folds]
        labels = [torch.from_numpy(y[f]) for f in folds]
        rows = Rows(xs[0], labels[0])
        if len(folds) > 1:
            fold_of = torch.arange(len(folds)).repeat_interleave(len(points))
            rows = Rows(torch.stack(xs), torch.stack(labels), fold_of)
        vector = template.structure == "vector"
        weights = torch.ones(replicas, k) if vector else torch.eye(k).repeat(replicas, 1, 1)
        params = [weights, torch.zeros(replicas, k)]
        l2 = torch.tensor([float(m.l2) for m in flat], dtype=torch.float32)
        mu = torch.tensor([m._bias_penalty() for m in flat], dtype=torch.float32)
        generators = {
            (j, m.seed): Permutations(rows.n, m.seed) for j in range(len(folds)) for m in flat
        }
        orders_of = [generators[(r // len(points), m.seed)] for r, m in enumerate(flat)]
        offsets = torch.zeros(replicas, dtype=torch.long)
        with _one_thread():
            first = template._train_stage(params, rows, l2, mu, template.lr, orders_of, offsets)
            second = torch.zeros_like(first)
            if template.double_fit and template.structure == "matrix":
                second = template._train_stage(
                    params, rows, l2, mu, template.lr / 10, orders_of, first
                )
        for r, model in enumerate(flat):
            model.n_classes_, model.classes_ = k, np.arange(k)
            model.coef_ = params[0][r].numpy().copy()
            model.intercept_ = params[1][r].numpy().copy()
            model.n_epochs_ = (int(first[r]), int(second[r]))
        return models

    def _copy_with(self, point: dict) -> KerasStyleScaling:
        params = self.get_params(deep=False)
        params.update(point)
        return type(self)(**params)

    def _fit(self, logits, y):
        (fitted,) = self.fit_grid(logits, y, [{}])
        self.coef_, self.intercept_, self.n_epochs_ = (
            fitted.coef_,
            fitted.intercept_,
            fitted.n_epochs_,
        )

    def _predict_proba(self, logits):
        x = torch.from_numpy(self._inputs(logits))[None]
        weights = torch.from_numpy(np.asarray(self.coef_, dtype=np.float32))[None]
        bias = torch.from_numpy(np.asarray(self.intercept_, dtype=np.float32))[None]
        with torch.no_grad():
            probs = torch.softmax(self._outputs(weights, bias, x)[0], dim=-1)
        # The float32 output as Keras's predict returns it, renormalised in float64 so the
        # rows sum to 1 for every metric.
        probs = probs.numpy().astype(np.float64)
        return probs / probs.sum(axis=1, keepdims=True)
