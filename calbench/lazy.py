"""Modules imported on first use: torch costs about 2 s to import on a 2-core machine,
and most runs (scaling maps, k-NN, binning, every table and figure) never touch it."""

from __future__ import annotations

import importlib


class LazyModule:
    """Stands for module ``name`` and imports it on the first attribute read.

    Unlike `importlib.util.LazyLoader` it leaves ``sys.modules`` alone, so libraries that
    look there for torch (array-API checks) do not import it either.
    """

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazily imported module {self._name!r}>"
