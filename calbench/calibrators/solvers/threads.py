"""BLAS thread limits for the calibrators' matrix products, from one lookup of the BLAS
libraries per process (a lookup costs milliseconds, more than a small fit)."""

from __future__ import annotations

import os

from threadpoolctl import ThreadpoolController

_CONTROLLER = ThreadpoolController()
_STARTING = [i for i in _CONTROLLER.info() if i.get("user_api") == "blas"]


def blas_threads(limit: int | None):
    """A context in which BLAS uses at most ``limit`` threads (None: as many as it had at
    start-up, also inside another limit)."""
    if limit is None:
        limit = max(info["num_threads"] for info in _STARTING) if _STARTING else None
    return _CONTROLLER.limit(limits=limit, user_api="blas")


def cores() -> int:
    """The cores this process may run on (its affinity where the system says, as a
    container's CPU set does), for the calibrators' own thread pools."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
