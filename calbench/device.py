"""Where torch-fitted calibrators and criteria compute (``device=cpu|cuda|cuda:N|auto``).

Only the fitting moves: random numbers are drawn on the CPU from the seeded generator and
results come back as float64 numpy arrays, so a GPU run gives the CPU run's numbers up to
floating-point rounding, and the store treats both as the same cell. Asking for a GPU where
there is none falls back to the CPU with one warning instead of failing a sweep.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

from calbench.errors import CalbenchError
from calbench.lazy import LazyModule

torch = LazyModule("torch")


@functools.cache
def _fallback_warning(name: str) -> None:
    warnings.warn(
        f"device={name}: no CUDA GPU is available to torch (torch.cuda.is_available() is "
        "False); fitting on the CPU instead.",
        RuntimeWarning,
        stacklevel=3,
    )


def resolve_device(name: str | None) -> torch.device:
    """The torch device for ``name``: ``cpu``, ``cuda``/``cuda:N`` (CPU with a warning when
    no GPU is present) or ``auto`` (a GPU if there is one)."""
    name = "cpu" if name is None else str(name)
    if name == "cpu":
        return torch.device("cpu")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "cuda" and not name.startswith("cuda:"):
        raise CalbenchError(f"Unknown device {name!r}; use cpu, cuda, cuda:N or auto.")
    if not torch.cuda.is_available():
        _fallback_warning(name)
        return torch.device("cpu")
    return torch.device(name)


#: The arrays `to_device` has sent within the innermost `reuse_transfers` (none outside).
_SCOPES: list[dict] = []


@contextlib.contextmanager
def reuse_transfers():
    """Within it, `to_device` sends each array once: an inner-CV search refits the same
    fold's features at every grid point, and a default fit reads them in several steps
    (at ImageNet shape 200 MB a copy, 20 to 60 ms a transfer). The arrays are the caller's
    own and unchanged while it lasts (an identity cache cannot see writes); a scope inside
    another uses the outer one, and the tensors go when the outermost ends."""
    if _SCOPES:
        yield
        return
    _SCOPES.append({})
    try:
        yield
    finally:
        _SCOPES.pop().clear()


def to_device(array, device, dtype=None):
    """``array`` (numpy) as a torch tensor on ``device`` (its own dtype, or ``dtype``);
    within `reuse_transfers`, the tensor sent before for the same array object."""
    import numpy as np

    key = (str(device), str(dtype))
    cache = _SCOPES[-1] if _SCOPES else None
    if cache is not None:
        held = cache.get(id(array))
        if held is not None and held[0] is array and held[1] == key:
            return held[2]
    tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=dtype)).to(device)
    if cache is not None:
        cache[id(array)] = (array, key, tensor)  # the array held: its id stays its own
    return tensor
