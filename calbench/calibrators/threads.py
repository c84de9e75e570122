"""BLAS thread limits for the calibrators' matrix products, from one lookup of the BLAS
libraries per process (a lookup costs milliseconds, more than a small fit)."""

from __future__ import annotations

from threadpoolctl import ThreadpoolController

_CONTROLLER = ThreadpoolController()


def blas_threads(limit: int | None):
    """A context in which BLAS uses at most ``limit`` threads (None: all of them)."""
    return _CONTROLLER.limit(limits=limit, user_api="blas")
