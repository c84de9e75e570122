"""Two made-up models' scores to try calbench on (``calbench data example``): what the
README's tour and the guides run as "your own" files.

``model_a.npz`` and ``model_b.npz``: 4 classes, 1,500 calibration and 1,500 test rows each,
logits of a model that is right about 60% of the time; model_b's are 2.5 times larger (an
over-confident model, which temperature scaling should cool). Seeded: the same files on
every machine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calbench.atomic import atomic_save_npz

#: The files' names, and how far each model's logits are scaled.
MODELS = {"model_a": 1.0, "model_b": 2.5}


def write_example_models(folder=".") -> list[Path]:
    """Write the two models' ``.npz`` files into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for name, scale in MODELS.items():
        n, k = 3000, 4
        y = rng.integers(0, k, n)
        z = rng.normal(size=(n, k))
        z[np.arange(n), y] += 1.5
        z *= scale
        path = folder / f"{name}.npz"
        atomic_save_npz(
            path, logits_cal=z[:1500], y_cal=y[:1500], logits_test=z[1500:], y_test=y[1500:]
        )
        paths.append(path)
    return paths
