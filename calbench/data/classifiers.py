"""Base classifiers for benchmarks that start from features (Kull 4.1's non-neural study).

A classifier config (``conf/classifier/*.yaml``) names a scikit-learn estimator class by its
import path and its parameters; `make_classifier` builds it, behind a standard scaler when
asked, as a fresh unfitted pipeline.
"""

from __future__ import annotations

import importlib

from sklearn.base import is_classifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from calbench.errors import CalbenchError


def make_classifier(spec: dict, standardize: bool = True):
    """An unfitted classifier from ``{"name", "estimator": "module.Class", "params"}``."""
    name = spec.get("name", "?")
    path = spec.get("estimator")
    if not path or "." not in str(path):
        raise CalbenchError(
            f"classifier {name!r} has no estimator import path (e.g. "
            "estimator: sklearn.svm.SVC); pick one with classifier=NAME "
            "(see calbench/conf/classifier)."
        )
    module_name, _, class_name = str(path).rpartition(".")
    try:
        estimator_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        raise CalbenchError(f"classifier {name!r}: cannot import {path!r}.") from None
    try:
        estimator = estimator_class(**(spec.get("params") or {}))
    except TypeError as error:
        raise CalbenchError(f"classifier {name!r}: bad params for {path}: {error}") from None
    if not is_classifier(estimator) or not hasattr(estimator, "predict_proba"):
        raise CalbenchError(
            f"classifier {name!r}: {path} is not a classifier with predict_proba "
            "(SVC needs probability: true)."
        )
    return make_pipeline(StandardScaler(), estimator) if standardize else estimator
