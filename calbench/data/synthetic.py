"""The synthetic 3-class experiment of Valk 4.2, with a documented true calibration map.

Valk samples uncalibrated predictions from Dirichlet(0.5, 0.5, 0.5) and draws each label
from a known true calibration map c(p) = E[Y | P = p]. The thesis' map was learned from
CIFAR-5m and is not published, so calbench defines its own (`SyntheticTrueMap`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from calbench.data.dataset import Dataset
from calbench.errors import check_int
from calbench.simplex import TINY, softmax


@dataclass(frozen=True, eq=False)
class SyntheticTrueMap:
    r"""A realistic 3-class calibration map outside the Dirichlet family.

    .. math::

        c(p) = \sigma\!\left(\frac{A \ln p + b}{\tau(p)}\right),
        \qquad \tau(p) = 1 + \gamma \, (\max_j p_j)^2

    - **Over-confident like a neural net**: ``tau >= 1`` flattens the predictions, and more
      so the more confident they are (tau = 1.03 at the centre, 1.3 at a vertex with
      the default gamma = 0.3), as reliability diagrams of deep nets show.
    - **Not symmetric between classes**: class 1 is trusted most (larger diagonal of A),
      class 2 is over-predicted (smaller diagonal, negative bias) and a confident class-3
      prediction also raises class 1 (off-diagonal ``A[0, 2]``), as confusions do.
    - **Outside the Dirichlet family** sigma(W ln p + b): tau depends on p, so neither
      temperature, vector or matrix scaling nor Dirichlet calibration contains c, and the
      methods can be told apart by how close they get.

    With these values the uncalibrated predictions have a true confidence CE of 0.080 and
    classwise CE of 0.056 (Valk Table 1: 0.079 and 0.056), temperature scaling leaves
    0.050 / 0.037 and Dirichlet calibration 0.014 / 0.013 (seed 0).
    Parameters are plain arrays so the map is picklable and can be re-created exactly.
    """

    # fmt: off
    weights: np.ndarray = field(
        default_factory=lambda: np.array(
            [[1.00, 0.00, 0.20],
             [0.05, 0.85, 0.00],
             [0.00, 0.10, 0.95]]
        )
    )
    # fmt: on
    bias: np.ndarray = field(default_factory=lambda: np.array([0.10, -0.20, 0.05]))
    gamma: float = 0.3

    def __call__(self, probs: np.ndarray) -> np.ndarray:
        p = np.asarray(probs, dtype=np.float64)
        log_p = np.log(np.clip(p, TINY, None))
        tau = 1.0 + self.gamma * p.max(axis=1, keepdims=True) ** 2
        return softmax((log_p @ self.weights.T + self.bias) / tau)


def sample_labels(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row (inverse CDF, vectorised)."""
    u = rng.random(len(probs))
    cdf = np.cumsum(probs, axis=1)
    return np.minimum((u[:, None] > cdf).sum(axis=1), probs.shape[1] - 1)


def make_synthetic_dirichlet(
    seed: int = 0,
    n_cal: int = 5000,
    n_test: int = 100_000,
    concentration: float = 0.5,
    name: str = "synthetic_dirichlet",
) -> Dataset:
    """Valk 4.2.1: predictions ~ Dirichlet(concentration * 1), labels ~ c(p).

    Seeded: the same seed gives the same arrays. Generated in well under a second.
    """
    n_cal = check_int(n_cal, "n_cal", "synthetic_dirichlet")
    n_test = check_int(n_test, "n_test", "synthetic_dirichlet")
    rng = np.random.default_rng(seed)
    true_map = SyntheticTrueMap()
    probs = rng.dirichlet(np.full(3, float(concentration)), size=n_cal + n_test)
    labels = sample_labels(true_map(probs), rng)
    return Dataset.from_probabilities(
        name,
        probs[:n_cal],
        labels[:n_cal],
        probs[n_cal:],
        labels[n_cal:],
        true_map=true_map,
        class_names=["class 1", "class 2", "class 3"],
        source=f"synthetic_dirichlet(seed={seed})",
    )
