"""The calibrator classes by registered name, with the parameters each name fixes
(``dir_l2`` is `DirichletCalibrator` with ``regularization="l2"``); compositions
(``compose``) and a user's own class (``module:Class``). Method variants (``conf/method``)
build on these names (`calbench.calibrators.methods`).

Registration is found by looking: each family module under ``calbench/calibrators/<family>/``
declares the names it registers beside its classes, a module-level ``REGISTERED`` dict
(name -> (class, fixed parameters)), and `library_calibrators` walks the package for them,
so a new calibrator is its class (with its ``REGISTERED`` entry), a YAML file under
``conf/method`` and a test; this file is not edited. Two modules registering one name is an
error naming both.

`LIBRARY_CALIBRATORS` are calbench's own methods; the papers' procedure twins are registered
by their paper packs (`calbench.packs`: each pack's ``CALIBRATORS``), and `CALIBRATORS` is
the two together, the packs loaded on first use, so a pack is never imported by name."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys
from collections.abc import Mapping

from calbench.calibrators.base import Calibrator
from calbench.calibrators.composition import Composition
from calbench.errors import CalbenchError, nearest, unknown_name
from calbench.packs import PackRegistry

#: The packages under ``calbench/calibrators/`` that hold no calibrator: the solvers.
NOT_FAMILIES = ("solvers",)


def _import_failed(name: str):
    raise CalbenchError(f"calibrator family {name} failed to import") from sys.exc_info()[1]


def family_modules(package: str = "calbench.calibrators") -> list[str]:
    """The modules of every family subpackage of ``package`` (its subpackages but
    `NOT_FAMILIES`), by name, in the order `pkgutil` walks them (sorted by name)."""
    prefix = package + "."
    path = sys.modules[package].__path__
    found = []
    # A family whose package fails to import is an error, not a family silently left out.
    for info in pkgutil.walk_packages(path, prefix, onerror=_import_failed):
        family = info.name[len(prefix) :].split(".")[0]
        if info.name.count(".") > prefix.count(".") and family not in NOT_FAMILIES:
            found.append(info.name)
    return found


def library_calibrators(
    package: str = "calbench.calibrators",
) -> dict[str, tuple[type[Calibrator], dict]]:
    """Every family module's ``REGISTERED`` entries, merged: name -> (class, fixed
    parameters). A name two modules register is an error naming both."""
    merged: dict[str, tuple[type[Calibrator], dict]] = {}
    owner: dict[str, str] = {}
    for name in family_modules(package):
        registered = getattr(importlib.import_module(name), "REGISTERED", None) or {}
        for key, entry in registered.items():
            if key in owner:
                raise CalbenchError(
                    f"calibrator name {key!r} is registered twice: by {owner[key]} and by "
                    f"{name}; rename one of them."
                )
            owner[key] = name
            merged[key] = entry
    return merged


def family(cls: type) -> str:
    """A calibrator class's family, as ``calbench list methods`` shows it: the family
    subpackage of calbench's own class (``calbench.calibrators.scaling.temperature`` ->
    ``scaling``), or of the nearest library class a pack's twin derives from (or the one it
    declares as ``_family``); else the pack that holds it (``kull2019``), and ``own`` for a
    user's class (``module:Class``) outside every family."""
    prefix = "calbench.calibrators."
    for klass in cls.__mro__:
        declared = vars(klass).get("_family")
        if declared:
            return declared
        parts = klass.__module__.split(".")
        if klass.__module__.startswith(prefix) and len(parts) > 3 and parts[2] not in NOT_FAMILIES:
            return parts[2]
    parts = cls.__module__.split(".")
    if cls.__module__.startswith("calbench.papers.") and len(parts) > 2:
        return parts[2]
    return "own"


LIBRARY_CALIBRATORS: dict[str, tuple[type[Calibrator], dict]] = library_calibrators()


CALIBRATORS: Mapping[str, tuple[type[Calibrator], dict]] = PackRegistry(
    "CALIBRATORS", LIBRARY_CALIBRATORS, "calibrator"
)


def imported_calibrator(path: str) -> type[Calibrator]:
    """A user's own calibrator, ``module:Class`` (the module importable from the working
    directory, as ``python -m`` would find it): a `Calibrator` subclass, so it runs under
    every protocol, metric and table like the registered ones."""
    module_name, _, class_name = path.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        ours = bool(missing) and (module_name + ".").startswith(missing + ".")
        fix = (
            f" Run calbench from the folder that holds {missing.split('.')[0]}.py (or its "
            "package), put it in a pack's folder (CALBENCH_PAPER_PACKS), or add its folder "
            "to PYTHONPATH."
            if ours
            else " (raised while importing it: the module itself imports what is missing)"
        )
        raise CalbenchError(f"cannot import calibrator {path!r}: {exc}.{fix}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        known = [n for n, v in vars(module).items() if isinstance(v, type)]
        raise CalbenchError(
            f"cannot import calibrator {path!r}: {module_name} has no {class_name!r}"
            f"{nearest(class_name, known)}."
        )
    if not (isinstance(cls, type) and issubclass(cls, Calibrator)):
        raise CalbenchError(
            f"{path} is not a calbench.calibrators.Calibrator subclass: subclass it and "
            "define _fit(logits, y) and _predict_proba(logits)."
        )
    return cls


def make_composition(first: str, second: str, **params) -> Composition:
    """``first`` then ``second`` (registered names); ``params`` as ``second__n_neighbors``."""
    return Composition(registered_calibrator(first), registered_calibrator(second)).set_params(
        **params
    )


def registered_calibrator(name: str, **params) -> Calibrator:
    """A new unfitted calibrator registered as ``name``, with ``params`` set.

    ``name="compose"`` builds a `Composition`: ``registered_calibrator("compose", first="ts",
    second="knn_kl", second__n_neighbors=256)``.
    """
    if name == "compose":
        try:
            return make_composition(**params)
        except TypeError as exc:
            raise CalbenchError(
                f"compose needs first=NAME and second=NAME (registered calibrators): {exc}"
            ) from None
        except ValueError as exc:
            if isinstance(exc, CalbenchError):
                raise
            raise CalbenchError(f"compose: {exc}") from None
    if ":" in name:
        cls, fixed = imported_calibrator(name), {}
    elif name not in CALIBRATORS:
        raise unknown_name("calibrator", name, CALIBRATORS, " Or your own class as module:Class.")
    else:
        cls, fixed = CALIBRATORS[name]
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise CalbenchError(
            f"Calibrator {name!r} has no parameter(s) {unknown}; its parameters are "
            f"{sorted(accepted - set(fixed))}."
        )
    clash = sorted(set(params) & set(fixed))
    if clash:
        raise CalbenchError(
            f"Parameter(s) {clash} are fixed by the name {name!r}; choose another method name."
        )
    return cls(**fixed, **params)
