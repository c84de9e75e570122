"""Views of a loaded data set that a ``dataset`` config key asks for, by key: the library's
(``binary``: a two-class task of a multiclass set) and those the paper packs bring (each
pack's ``VIEWS``, e.g. CalArena's ``float32_probabilities``), so a benchmark's way of
storing its inputs lives in its pack. A view is ``f(dataset, value) -> dataset``, applied
where the key is set and true, the library's first, then the packs' in their order."""

from __future__ import annotations

from calbench.packs import PackRegistry


def _binary(dataset, value):
    """``binary: {positive: [...], names: [...]}`` (`Dataset.as_binary`)."""
    return dataset.as_binary(**value)


LIBRARY_VIEWS = {"binary": _binary}
VIEWS = PackRegistry("VIEWS", LIBRARY_VIEWS, "data-set view")


def apply_views(dataset, options: dict):
    """``dataset`` seen as ``options`` (the config's view keys, popped from it) ask."""
    for key in VIEWS:
        value = options.pop(key, None)
        if value:
            dataset = VIEWS[key](dataset, value)
    return dataset


def view_keys() -> frozenset[str]:
    return frozenset(VIEWS)
