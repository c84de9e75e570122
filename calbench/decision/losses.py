"""The loss matrices of the papers, by name (``loss=`` configs), and their checks."""

from __future__ import annotations

import numpy as np

from calbench.errors import CalbenchError, unknown_name

#: Ho 4.1.2: buying a mushroom by its edibility class (rows) -> accept / reject.
FUNGI_CLASSES = ("deadly_poisonous", "poisonous", "inedible", "edible_bad", "edible", "edible_good")
_FUNGI_BUY = [[10000, 0], [1000, 0], [100, 0], [40, 0], [0, 10], [0, 20]]

#: Ho 4.1.3 (after Zhao et al., shifted to 0): skin lesion class -> no treat / treat.
HAM10000_CLASSES = ("akiec", "bcc", "bkl", "df", "nv", "mel", "vasc")
_HAM10000_TREAT = [[11, 0], [11, 0], [0, 4], [0, 1.5], [0, 2.5], [9.5, 0], [0, 2]]


def zero_one(n_classes: int) -> np.ndarray:
    """0/1 loss: cost 1 for any wrong class."""
    return 1.0 - np.eye(n_classes)


def zero_one_reject(n_classes: int, reject_cost: float = 0.1) -> np.ndarray:
    """0/1 loss with a reject action (last column) of constant cost ``reject_cost``."""
    if not 0 <= reject_cost <= 1:
        raise CalbenchError(f"reject_cost must lie in [0, 1]; got {reject_cost}.")
    return np.hstack([zero_one(n_classes), np.full((n_classes, 1), float(reject_cost))])


def _fixed(name, matrix, classes, n_classes):
    if n_classes != len(classes):
        raise CalbenchError(
            f"loss {name!r} is defined for the {len(classes)} classes {', '.join(classes)}; "
            f"the data set has {n_classes}. Use it with its data set (conf/loss/{name}.yaml)."
        )
    return np.asarray(matrix, dtype=np.float64)


def fungi_buy(n_classes: int = 6) -> np.ndarray:
    """Ho 4.1.2: accept (buy) or reject a mushroom of each edibility class."""
    return _fixed("fungi_buy", _FUNGI_BUY, FUNGI_CLASSES, n_classes)


def ham10000_treat(n_classes: int = 7, idk_cost: float | None = None) -> np.ndarray:
    """Ho 4.1.3: no treat / treat; with ``idk_cost`` an "I do not know" action of that
    constant cost is added (Ho 4.4.3)."""
    matrix = _fixed("ham10000_treat", _HAM10000_TREAT, HAM10000_CLASSES, n_classes)
    if idk_cost is None:
        return matrix
    if idk_cost < 0:
        raise CalbenchError(f"idk_cost must be non-negative; got {idk_cost}.")
    return np.hstack([matrix, np.full((n_classes, 1), float(idk_cost))])


def c100_dangerous(n_classes: int = 20, cost: float = 10000.0, dangerous=(18, 19)) -> np.ndarray:
    """Ho 4.1.1: 0/1 loss on the CIFAR-100 superclasses, except that missing a dangerous
    class (18 and 19, the vehicle superclasses) costs ``cost``."""
    dangerous = list(dangerous)
    if any(not 0 <= c < n_classes for c in dangerous):
        raise CalbenchError(
            f"c100_dangerous: dangerous classes {dangerous} are not among the {n_classes} classes."
        )
    matrix = zero_one(n_classes)
    matrix[dangerous] *= float(cost)
    return matrix


def convex_loss(l0: np.ndarray, l1: np.ndarray, eps: float) -> np.ndarray:
    """The family ``l0 + eps * l1`` of Ho 3.4 / 4.4."""
    l0, l1 = np.asarray(l0, dtype=np.float64), np.asarray(l1, dtype=np.float64)
    if l0.shape != l1.shape:
        raise CalbenchError(f"convex_loss: l0 {l0.shape} and l1 {l1.shape} differ in shape.")
    return l0 + float(eps) * l1


LOSSES = {
    "zero_one": zero_one,
    "zero_one_reject": zero_one_reject,
    "fungi_buy": fungi_buy,
    "ham10000_treat": ham10000_treat,
    "c100_dangerous": c100_dangerous,
}


def check_loss_matrix(matrix, n_classes: int, where: str) -> np.ndarray:
    """A finite (n_classes, n_actions >= 2) matrix."""
    arr = np.asarray(matrix, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != n_classes or arr.shape[1] < 2:
        raise CalbenchError(
            f"{where}: the loss matrix must have one row per class ({n_classes}) and at least "
            f"two actions; got shape {arr.shape}."
        )
    if not np.isfinite(arr).all():
        raise CalbenchError(f"{where}: the loss matrix has NaN or infinite entries.")
    return arr


def make_loss(name: str, n_classes: int, **options) -> np.ndarray:
    """The loss matrix registered as ``name`` for ``n_classes`` classes."""
    if name not in LOSSES:
        raise unknown_name("loss", name, LOSSES)
    try:
        matrix = LOSSES[name](n_classes, **options)
    except TypeError as error:
        raise CalbenchError(f"loss {name!r} (conf/loss/{name}.yaml): {error}") from None
    return check_loss_matrix(matrix, n_classes, f"loss {name!r} (conf/loss/{name}.yaml)")
