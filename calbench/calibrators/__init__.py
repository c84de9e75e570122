"""Calibrators by name: ``make_calibrator("dir_odir", reg_lambda=1e-3)``.

A name is a method of ``conf/method`` (what ``calbench run method=NAME`` runs: the variant's
fixed parameters; ``method(NAME)`` gives its grid too) or else a registered calibrator
(`calbench.calibrators.registry`). A new method is three edits: its class with its
``REGISTERED`` entry in its family's module (``calibrators/<family>/``), one YAML file under
``conf/method`` and one test.
"""

from __future__ import annotations

from calbench.calibrators.base import Calibrator
from calbench.calibrators.composition import Composition
from calbench.calibrators.methods import method, method_configs
from calbench.calibrators.registry import CALIBRATORS, registered_calibrator
from calbench.errors import unknown_name


def make_calibrator(name: str, **params) -> Calibrator:
    """A new unfitted calibrator: the method ``name`` (``conf/method/NAME.yaml``, as
    ``calbench run method=NAME`` builds it, before its grid search) or else the calibrator
    registered as ``name``, with ``params`` set. ``make_calibrator("compose", first="ts",
    second="knn_kl", second__n_neighbors=256)`` composes two registered calibrators;
    ``module:Class`` is your own `Calibrator` subclass."""
    if name in method_configs():
        return method(name, **params)[0]
    if name != "compose" and ":" not in name and name not in CALIBRATORS:
        known = sorted({*method_configs(), *CALIBRATORS})
        raise unknown_name("method", name, known, " Or your own class as module:Class.")
    return registered_calibrator(name, **params)


__all__ = [
    "CALIBRATORS",
    "Calibrator",
    "Composition",
    "make_calibrator",
    "method",
    "registered_calibrator",
]
