"""CIFAR-100 superclasses (Ho 4.1.1): 20 coarse classes from a fine-class model.

A coarse class's probability is the sum of its 5 fine classes' probabilities, and a sample's
coarse label is its fine label's superclass (the standard CIFAR-100 fine-to-coarse map,
shipped in ``conf/dataset/c100_superclass.yaml``). Ho trained his own coarse ResNet32, which
was never published; any fine-class CIFAR-100 scores in the standard test-set order (Kull
et al.'s pickles, netcal's records) stand in, by name.
"""

from __future__ import annotations

import numpy as np

from calbench.data.dataset import Dataset
from calbench.data.loaders import load_kull_pickle, load_npz
from calbench.errors import CalbenchError
from calbench.simplex import softmax


def coarse_map(fine_to_coarse) -> np.ndarray:
    """The (fine x coarse) 0/1 matrix of a fine-to-coarse list; every coarse class used."""
    index = np.asarray(fine_to_coarse)
    if index.ndim != 1 or index.dtype.kind not in "iu" or index.min() < 0:
        raise CalbenchError("fine_to_coarse must be a list of non-negative class indices.")
    n_coarse = int(index.max()) + 1
    if np.bincount(index, minlength=n_coarse).min() == 0:
        raise CalbenchError("fine_to_coarse leaves a coarse class without fine classes.")
    matrix = np.zeros((len(index), n_coarse))
    matrix[np.arange(len(index)), index] = 1.0
    return matrix


def to_superclasses(dataset: Dataset, fine_to_coarse, class_names=None) -> Dataset:
    matrix = coarse_map(fine_to_coarse)
    if dataset.n_classes != matrix.shape[0]:
        raise CalbenchError(
            f"{dataset.name}: {dataset.n_classes} classes, but the superclass map covers "
            f"{matrix.shape[0]} fine classes."
        )
    index = np.asarray(fine_to_coarse)
    return Dataset.from_probabilities(
        f"{dataset.name}_superclass",
        softmax(dataset.logits_cal) @ matrix,
        index[dataset.y_cal],
        softmax(dataset.logits_test) @ matrix,
        index[dataset.y_test],
        class_names=list(class_names) if class_names else None,
        source=f"{dataset.source} (summed into {matrix.shape[1]} superclasses)",
    )


def load_superclass_pickle(
    path, fine_to_coarse, class_names=None, trusted: bool = False, sha256: str | None = None
):
    """Kull et al.'s fine-class CIFAR-100 pickle, summed into superclasses."""
    fine = load_kull_pickle(path, trusted=trusted, sha256=sha256)
    return to_superclasses(fine, fine_to_coarse, class_names)


def load_superclass_npz(
    path, fine_to_coarse, class_names=None, keys=None, split=None, sha256: str | None = None
):
    """A fine-class CIFAR-100 npz (`load_npz`: netcal's records, split on the fine labels),
    summed into superclasses."""
    fine = load_npz(path, keys=keys, split=split, sha256=sha256)
    return to_superclasses(fine, fine_to_coarse, class_names)
