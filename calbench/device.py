"""Where torch-fitted calibrators and criteria compute (``device=cpu|cuda|cuda:N|auto``).

Only the fitting moves: random numbers are drawn on the CPU from the seeded generator and
results come back as float64 numpy arrays, so a GPU run gives the CPU run's numbers up to
floating-point rounding, and the store treats both as the same cell. Asking for a GPU where
there is none falls back to the CPU with one warning instead of failing a sweep.
"""

from __future__ import annotations

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
