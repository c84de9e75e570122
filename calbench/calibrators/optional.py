"""The optional packages CalArena's methods call (the ``calarena`` extra), imported on use with
one error saying how to install them."""

from __future__ import annotations

import contextlib
import importlib

from calbench.errors import CalbenchError

#: The optional packages CalArena's methods call (the calarena extra): import name -> pip name.
_OPTIONAL = {
    "xgboost": "xgboost-cpu",
    "lightgbm": "lightgbm",
    "catboost": "catboost",
    "splinecalib": "splinecalib",
    "netcal": "netcal",
    "torchmin": "pytorch-minimize",
    "betacal": "betacal",
    "venn_abers": "venn-abers",
}


def optional_module(name: str):
    """Import one of CalArena's optional packages, or one error saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise CalbenchError(
            f"This method needs the {name!r} package, which calbench installs only with its "
            f"CalArena extra: pip install 'calbench[calarena]' (or pip install "
            f"{_OPTIONAL[name]}); `make install` includes it."
        ) from None


@contextlib.contextmanager
def quiet_tqdm(module):
    """``module``'s tqdm progress bars off for the duration (netcal's BBQ draws one per
    class; a sweep reports its own progress)."""
    before = module.tqdm
    module.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        module.tqdm = before
