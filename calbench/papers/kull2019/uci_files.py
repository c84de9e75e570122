"""Kull et al.'s own UCI data files (Kull 2019, 4.1), read as their experiment code reads them.

The files are those of dirichletcal/experiments_neurips at commit 54989edf (each data set's
YAML in ``conf/dataset`` gives the URLs and SHA-256 sums `calbench data fetch` uses), folder
``datasets/``: the old mldata.org MATLAB files (under ``mldata/``), ``sat.trn``/``sat.tst``
(landsat-satellite), ``movement_libras.data`` and ``yeast.data``. Their loader
(``data_wrappers/datasets.py``) went through scikit-learn's ``fetch_mldata``, whose rules
`mldata_columns` repeats: one column is "data"; otherwise the column named ``label``
(else the first) is "target" and the one named ``data`` (else the second) is "data",
transposed to samples x features, and every other column keeps its name. Then each set picks
its features and target from those (`_KULL_SETS`, the branches of their
``get_mldata_dataset``), nominal features become 0..m-1 in sorted order, rows with missing
values are dropped where their code drops them, targets are relabelled 0..k-1 by sorted
value, and the features are standardised on each training part by the protocol.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calbench.data.tabular import FeatureSet
from calbench.errors import CalbenchError


def mldata_columns(matlab: dict) -> dict:
    """fetch_mldata's reading of an mldata.org MATLAB dict (see the module docstring)."""
    names = [str(d[0]) for d in matlab["mldata_descr_ordering"][0]]
    if len(names) == 1:
        return {"data": matlab[names[0]].T}
    columns = {name: matlab[name] for name in names}
    target = "label" if "label" in names else names[0]
    data = "data" if "data" in names else names[1]
    columns["target"] = np.squeeze(columns.pop(target))
    columns["data"] = columns.pop(data).T
    return columns


def nominal_to_float(values) -> np.ndarray:
    """Kull's ``nominal_to_float``: each distinct string its index in sorted order."""
    return np.unique(_strings(values), return_inverse=True)[1].astype(np.float64).reshape(-1, 1)


def _rows(a) -> np.ndarray:
    """An mldata column (features x samples, or 1 x samples) as samples x features."""
    return np.asarray(a).T.reshape(np.asarray(a).shape[-1], -1).astype(np.float64)


def _strings(a) -> np.ndarray:
    return np.array([str(np.squeeze(v)) for v in np.ravel(a)])


def _mat(filename):
    def read(folder: Path):
        from scipy.io import loadmat

        return mldata_columns(loadmat(folder / filename))

    return read


# Pickers of (features, target) from the columns: the branches of Kull's loader.
def _abalone(m):
    return np.hstack([m["data"], _rows(m["int1"])]), _strings(m["target"])


def _balance(m):
    return _rows(m["target"]), _strings(m["data"])


def _car(m):
    names = ["data", "target", "doors", "persons", "lug_boot", "safety"]
    return np.hstack([nominal_to_float(m[n]) for n in names]), _strings(m["class"])


def _cleveland(m):
    return np.hstack([_rows(m["target"]), m["data"]]), _strings(m["int2"])


def _last_column(m):
    return m["data"][:, :-1], m["data"][:, -1]


def _target_t(m):  # waveform, mfeat-*: data = target.T, target = data
    return _rows(m["target"]), np.ravel(m["data"])


def _page_blocks(m):
    full = np.hstack([_rows(m["target"]), m["data"], _rows(m["int2"])])
    return full[:, :-1], full[:, -1]


def _segment(m):
    features = np.hstack([_rows(m["int2"]), m["data"], _rows(m["target"]), _rows(m["double3"])])
    return features, _strings(m["class"])


def _vowel(m):
    return _rows(m["double0"]), _strings(m["Class"])


def _plain(m):
    return m["data"], np.ravel(m["target"])


def _sat(folder: Path):
    train, test = np.loadtxt(folder / "sat.trn"), np.loadtxt(folder / "sat.tst")
    both = np.vstack([train, test])
    return {"data": both[:, :-1], "target": both[:, -1]}


def _libras(folder: Path):
    table = np.loadtxt(folder / "movement_libras.data", delimiter=",")
    return {"data": table[:, :-1], "target": table[:, -1]}


def _yeast(folder: Path):
    rows = [line.split() for line in (folder / "yeast.data").read_text().splitlines() if line]
    return {
        "data": np.array([[float(v) for v in r[1:-1]] for r in rows]),
        "target": np.array([r[-1] for r in rows]),
    }


def _given(m):
    return m["data"], m["target"]


#: Kull's name -> (files, reader of the folder, picker of (features, target), drop missing)
_KULL_SETS = {
    "abalone": (["uci-20070111-abalone.mat"], _abalone, False),
    "balance-scale": (["uci-20070111-balance-scale.mat"], _balance, False),
    "car": (["uci-20070111-car.mat"], _car, False),
    "cleveland": (["uci-20070111-cleveland.mat"], _cleveland, True),
    "dermatology": (["uci-20070111-dermatology.mat"], _last_column, True),
    "glass": (["glass.mat"], _plain, False),
    "iris": (["iris.mat"], _plain, False),
    "landsat-satellite": (["sat.trn", "sat.tst"], _given, False),
    "libras-movement": (["movement_libras.data"], _given, False),
    "mfeat-karhunen": (["uci-20070111-mfeat-karhunen.mat"], _target_t, False),
    "mfeat-morphological": (["uci-20070111-mfeat-morphological.mat"], _target_t, False),
    "mfeat-zernike": (["uci-20070111-mfeat-zernike.mat"], _target_t, False),
    "optdigits": (["uci-20070111-optdigits.mat"], _last_column, False),
    "page-blocks": (["uci-20070111-page-blocks.mat"], _page_blocks, False),
    "pendigits": (["uci-20070111-pendigits.mat"], _last_column, False),
    "segment": (["datasets-uci-segment.mat"], _segment, False),
    "vehicle": (["vehicle.mat"], _plain, False),
    "vowel": (["uci-20070111-vowel.mat"], _vowel, False),
    "waveform-5000": (["datasets-uci-waveform-5000.mat"], _target_t, False),
    "yeast": (["yeast.data"], _given, False),
}
_TEXT_READERS = {"landsat-satellite": _sat, "libras-movement": _libras, "yeast": _yeast}

#: mldata's integer code for a missing value (Kull's ``Data.uci_nan``).
_UCI_NAN = -2147483648


def kull_uci_arrays(name: str, folder) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Features (float64, unstandardised), labels 0..k-1 and class names of one of Kull's
    sets, read from ``folder`` as their code reads it."""
    if name not in _KULL_SETS:
        raise CalbenchError(f"Unknown Kull UCI set {name!r}; known: {', '.join(_KULL_SETS)}.")
    files, pick, drop_missing = _KULL_SETS[name]
    folder = Path(folder)
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise CalbenchError(
            f"Kull's {name} needs {', '.join(missing)} in {folder}: "
            f"calbench data fetch uci_{name.replace('-', '_')} (or --from DIR)."
        )
    reader = _TEXT_READERS.get(name) or _mat(files[0])
    features, target = pick(reader(folder))
    features = np.asarray(features, dtype=np.float64)
    target = _strings(target) if np.asarray(target).dtype.kind in "OUS" else np.ravel(target)
    if drop_missing:  # Kull's remove_rows_with_missing_values
        bad = np.isnan(features).any(axis=1) | (features == _UCI_NAN).any(axis=1)
        features, target = features[~bad], target[~bad]
    class_names, y = np.unique(target, return_inverse=True)
    return features, y.astype(np.int64), [str(c) for c in class_names]


def load_kull_uci(source: str, classifier: dict, path, standardize: bool = True) -> FeatureSet:
    """One of Kull's UCI sets from the folder holding its file(s), with a classifier config.
    (MATLAB and text files are parsed, never unpickled: `calbench data verify` and `data
    has` check their SHA-256 against the registry.)"""
    if not classifier or classifier.get("name", "none") == "none":
        raise CalbenchError(
            f"dataset {source!r} holds features, not scores: pick the classifier to train on "
            "it, e.g. classifier=logistic (options in calbench/conf/classifier)."
        )
    features, y, class_names = kull_uci_arrays(source, path)
    return FeatureSet(
        f"uci_{source.replace('-', '_')}",
        features,
        y,
        classifier=dict(classifier),
        standardize=standardize,
        class_names=class_names,
        source=f"Kull et al.'s {', '.join(_KULL_SETS[source][0])}",
    )


def files_of(name: str) -> list[str]:
    return list(_KULL_SETS[name][0])


KULL_UCI_NAMES = tuple(_KULL_SETS)
