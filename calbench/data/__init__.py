"""Data sets: the `Dataset` record and `load_dataset`, one registry of loaders by name:
the library's (`LIBRARY_LOADERS`) and those the paper packs bring (each pack's ``LOADERS``,
`calbench.packs.PackRegistry`), so a paper's own file reader lives in its pack."""

from __future__ import annotations

import inspect

from calbench.data.dataset import Dataset
from calbench.data.hdf5 import load_hdf5
from calbench.data.loaders import load_kull_pickle, load_npz, load_torch_pair
from calbench.data.offline_neural import make_offline_neural
from calbench.data.superclass import load_superclass_npz, load_superclass_pickle
from calbench.data.synthetic import SyntheticTrueMap, make_synthetic_dirichlet
from calbench.data.tabular import FeatureSet, load_tabular
from calbench.errors import CalbenchError, unknown_name
from calbench.packs import PackRegistry

LIBRARY_LOADERS = {
    "synthetic_dirichlet": make_synthetic_dirichlet,
    "npz": load_npz,
    "kull_pickle": load_kull_pickle,
    "offline_neural": make_offline_neural,
    "tabular": load_tabular,
    "superclass_pickle": load_superclass_pickle,
    "superclass_npz": load_superclass_npz,
    "torch_pair": load_torch_pair,
    "hdf5": load_hdf5,
}
LOADERS = PackRegistry("LOADERS", LIBRARY_LOADERS, "dataset loader")


def load_dataset(name: str, /, **options) -> Dataset | FeatureSet:
    """Load a data set by loader name, e.g. ``load_dataset("synthetic_dirichlet", seed=0)``.

    ``options`` go to the loader (``path=...``, ``seed=...``; ``name=`` renames the set).
    """
    if name not in LOADERS:
        raise unknown_name("dataset loader", name, LOADERS)
    loader = LOADERS[name]
    accepted = inspect.signature(loader).parameters
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise CalbenchError(
            f"Dataset loader {name!r} takes no option(s) {unknown}; it takes {sorted(accepted)}."
        )
    return loader(**options)


__all__ = ["Dataset", "FeatureSet", "LOADERS", "SyntheticTrueMap", "load_dataset"]
