"""Rahimi et al.'s diagonal intra order-preserving calibration (DIAG) as their public code
trains it: the procedure behind Valk's IOP rows (AmirooR/IntraOrderPreservingCalibration,
``calibrate.py`` with ``exp_dir/CIFAR10/DenseNet40/DIAG/config.json``; Valk copied its
``scores.npy`` into msc-knn-cal, helpers/iop_precomp.py).

What differs from calbench's ``iop_diag`` (`calbench.calibrators.order_preserving.intra`, the
paper's map fitted to its optimum in float64):

- **The map.** One increasing function applied to every logit, an unconstrained monotonic
  network (UMNN): ``phi(z) = integral_0^z g(t) dt + c`` with ``g = ELU(MLP(t, 0)) + 1 + 1e-8``,
  the MLP ``2 -> 2 -> 2 -> 1`` with ReLUs, the integral by Clenshaw-Curtis quadrature on 51
  nodes (their ``ParallelNeuralIntegral``), all in float32. The offset ``c`` comes from a
  second small network fed zeros: it is a constant the softmax ignores, but its parameters
  are part of the optimiser's vector, so they are kept.
- **Cross-validation folds, not the whole set.** Their ``calibrate.py`` splits the
  calibration set by ``KFold(5, shuffle=True, random_state=1357)`` and trains one model per
  fold on its four fifths; ``evaluate.py --save_logits`` writes each fold's test scores to
  ``fold_k/scores.npy``. (Its "ensemble" reloads fold 5's checkpoint five times: the
  directory is not updated inside its loop.) Which fold's file Valk copied is not recorded,
  so ``fold`` (1 to 5) spans the candidates.
- **Their initialisation.** ``torch.manual_seed(1357)``, then per fold in turn: the six
  ``nn.Linear`` layers (integrand first), one draw for the training loader's iterator, one
  for its ``RandomSampler`` (whose permutation orders the training rows), one for the
  evaluation loader's iterator. Fold k's start replays folds 1..k-1's draws. These are the
  draws today's torch makes (tests/papers/valk2022/test_reference_iop.py runs their loaders
  to check); the torch Valk ran is not recorded.
- **The optimiser.** ``torch.optim.LBFGS(lr=0.1, max_iter=2000, line_search_fn=
  "strong_wolfe")`` on the mean cross-entropy of all training rows at once. Their closure
  does not zero the gradients (``optimizer.zero_grad()`` runs once, before ``step``), so
  every evaluation adds its gradient to the sum of all before it, and L-BFGS steers by that
  running sum. That is kept: it is what produced their scores.
- **Output.** Valk's softmax of the scores (`reference_valk.valk_probabilities`: float32,
  minus the whole array's largest value), renormalised in float64 so that rows sum to 1 as
  every calibrator's do (float32 rows are off by up to about 1e-7).
"""

from __future__ import annotations

import math

import numpy as np

from calbench.calibrators.base import Calibrator
from calbench.calibrators.constraints import COUNT
from calbench.errors import CalbenchError, check_int
from calbench.lazy import LazyModule
from calbench.papers.valk2022.reference_valk import valk_probabilities

torch = LazyModule("torch")

#: Their seed (config.json ``seed``; also calibrate.py's default).
SEED = 1357


def clenshaw_curtis(nb_steps: int):
    """Their Clenshaw-Curtis weights and nodes on [-1, 1] (``compute_cc_weights``): float64
    arithmetic, float32 results, ``nb_steps + 1`` of each."""
    j = np.arange(nb_steps + 1).reshape(-1, 1)
    basis = np.cos((j @ j.T) * math.pi / nb_steps)
    basis[:, 0] = 0.5
    basis[:, -1] = 0.5 * basis[:, -1]
    basis = basis * 2 / nb_steps
    moments = np.arange(nb_steps + 1).reshape(-1, 1)
    moments[1::2] = 0
    moments = 2 / (1 - moments**2)
    moments[0] = 1
    moments[1::2] = 0
    weights = torch.tensor(basis.T @ moments).float()
    nodes = torch.tensor(np.cos(np.arange(nb_steps + 1).reshape(-1, 1) * math.pi / nb_steps))
    return weights, nodes.float()


def _mlp(generator, sizes, last):
    """``nn.Linear`` layers initialised as torch initialises them (Kaiming-uniform weights,
    uniform biases of bound 1/sqrt(fan_in)) but drawn from ``generator``, in layer order;
    ReLU between them and ``last`` after the final one."""
    layers = []
    for n_in, n_out in zip(sizes, sizes[1:], strict=False):
        layer = torch.nn.utils.skip_init(torch.nn.Linear, n_in, n_out)
        with torch.no_grad():
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1 / math.sqrt(n_in)
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
        layers += [layer, torch.nn.ReLU()]
    layers[-1] = last
    return torch.nn.Sequential(*layers)


class _Monotonic:
    """Their ``MonotonicModel`` (unconditioned): integrand network, offset network."""

    def __init__(self, generator, hidden, nb_steps):
        hidden = list(hidden)
        self.integrand = _mlp(generator, [2, *hidden, 1], torch.nn.ELU())
        self.offset = _mlp(generator, [1, *hidden, 2], torch.nn.Identity())
        self.weights, self.nodes = clenshaw_curtis(nb_steps)
        self.nb_steps = nb_steps

    def parameters(self):
        return [*self.integrand.parameters(), *self.offset.parameters()]

    def __call__(self, logits):
        x = logits.reshape(-1, 1)
        # Their quadrature from 0 to x, as written: the end point is 0 + n * (x / n).
        end = self.nb_steps * ((x - 0) / self.nb_steps)
        points = (end.unsqueeze(1) * (self.nodes + 1) / 2).reshape(-1, 1)
        values = self.integrand(torch.cat([points, torch.zeros_like(points)], 1)) + 1.0 + 1e-8
        values = values.reshape(len(x), self.nb_steps + 1, 1) * self.weights
        integral = values.sum(1) * (end - 0) / 2
        offset = self.offset(torch.zeros_like(x))[:, [0]]
        return (integral + offset).reshape(logits.shape)


def _draw(generator):
    """One of the draws a DataLoader iterator (its base seed) or a RandomSampler (its
    permutation's seed) makes from torch's global generator."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def fold_start(fold: int, hidden, nb_steps: int, seed: int = SEED):
    """Fold ``fold``'s initial model and the seed of the permutation its training loader
    yields the rows in, replaying the draws of the folds before it (module docstring)."""
    generator = torch.Generator().manual_seed(int(seed))
    for _ in range(fold):
        model = _Monotonic(generator, hidden, nb_steps)
        _draw(generator)  # the training loader's iterator
        permutation_seed = _draw(generator)  # its RandomSampler
        _draw(generator)  # the evaluation loader's iterator
    return model, permutation_seed


class RahimiDiagonal(Calibrator):
    """Rahimi et al.'s DIAG as their code trains it (module docstring).

    Parameters
    ----------
    fold : int
        Which of their five cross-validation models (1 to 5) predicts.
    n_folds : int
    hidden : tuple of int
        The integrand network's hidden layers (their config: 2 and 2).
    nb_steps : int
        Clenshaw-Curtis intervals (51 nodes at their 50).
    max_iter : int
        L-BFGS iterations (their 2000; at most 1.25 times as many evaluations).
    """

    _parameter_constraints = {"fold": COUNT, "n_folds": COUNT, "nb_steps": COUNT}

    def __init__(self, fold=1, n_folds=5, hidden=(2, 2), nb_steps=50, max_iter=2000):
        self.fold = fold
        self.n_folds = n_folds
        self.hidden = hidden
        self.nb_steps = nb_steps
        self.max_iter = max_iter

    def _fit(self, logits, y):
        from sklearn.model_selection import KFold

        fold, n_folds = int(self.fold), int(self.n_folds)
        if fold > n_folds:
            raise CalbenchError(
                f"iop (Rahimi's code): fold={fold} but there are only n_folds={n_folds}; "
                f"choose a fold from 1 to {n_folds}."
            )
        if len(logits) < n_folds:
            raise CalbenchError(
                f"iop (Rahimi's code): {len(logits)} calibration rows cannot make "
                f"n_folds={n_folds} folds; give at least {n_folds} rows or fewer folds."
            )
        hidden = [check_int(h, "hidden", "iop") for h in self.hidden]
        train = list(KFold(n_folds, shuffle=True, random_state=SEED).split(logits))[fold - 1][0]
        model, permutation_seed = fold_start(fold, hidden, int(self.nb_steps))
        order = torch.randperm(
            len(train), generator=torch.Generator().manual_seed(permutation_seed)
        )
        rows = train[order.numpy()]
        z = torch.from_numpy(np.asarray(logits[rows], dtype=np.float32))
        target = torch.from_numpy(np.asarray(y[rows], dtype=np.int64))
        optimiser = torch.optim.LBFGS(
            model.parameters(), lr=0.1, max_iter=int(self.max_iter), line_search_fn="strong_wolfe"
        )

        def closure():
            # No zero_grad here: their closure accumulates (module docstring).
            loss = torch.nn.functional.cross_entropy(model(z), target)
            loss.backward()
            return loss

        optimiser.zero_grad()
        optimiser.step(closure)
        self.model_ = model

    def _predict_proba(self, logits):
        with torch.no_grad():
            scores = self.model_(torch.from_numpy(np.asarray(logits, dtype=np.float32)))
        probs = valk_probabilities(scores.numpy()).astype(np.float64)
        return probs / probs.sum(axis=1, keepdims=True)
