"""The memory this process can still allocate, so that a fit too large for the machine is
refused before any work rather than failing inside scipy minutes later (or being killed)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from calbench.calibrators.solvers.lbfgs import LBFGS_COPIES
from calbench.errors import CalbenchError

#: A cgroup v1 "no limit" is a page-rounded 2^63; anything above this is no limit.
_NO_LIMIT = 2**60


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """A container's memory limit less its use (cgroup v2, then v1), where it has one."""
    for limit, usage in (
        (root / "memory.max", root / "memory.current"),
        (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes"),
    ):
        cap, used = _read_int(limit), _read_int(usage)
        if cap is not None and used is not None and cap < _NO_LIMIT:
            return max(cap - used, 0)
    return None


def available_memory() -> int | None:
    """Bytes this process can allocate without swapping: Linux's MemAvailable, or a
    container's headroom where smaller; elsewhere the physical memory; None if unknown."""
    known = [b for b in (_meminfo_available(), _cgroup_headroom()) if b is not None]
    if known:
        return min(known)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


#: Classes up to which the ODIR and L2 maps' full k x k map is fitted. At 1,000 (ImageNet)
#: a default fit takes 35 to 40 s on 16 cores and its grid of strengths minutes; at 2,000
#: one copy of the parameters is 32 MB and a step costs n k^2 = 1e11 multiplications on
#: 25,000 rows; at 5,000, 200 MB a copy and 6e11 a step, over the hundreds of steps a weak
#: penalty takes and the grid's 181 fits: hours, so refused before any work. (SMS, whose
#: fixed strengths need one fit of a few steps, is bounded by memory instead:
#: `calbench.calibrators.matrix.sms_memory.check_sms_memory`.)
MATRIX_MAX_CLASSES = 2000


def check_matrix_size(owner: str, n: int, k: int) -> None:
    """Refuse a full k x k map beyond `MATRIX_MAX_CLASSES` classes, before any work, naming
    what it would cost and the maps that scale."""
    if k > MATRIX_MAX_CLASSES:
        copy_gb = k * (k + 1) * 8 / 1e9
        raise CalbenchError(
            f"{owner}: a full {k} x {k} map has {k * (k + 1):,} parameters "
            f"({copy_gb:.1f} GB a copy, {LBFGS_COPIES * copy_gb:.0f} GB for L-BFGS-B's "
            f"workspace of {LBFGS_COPIES} copies) and a step costs n k^2 = {n * k * k:.1e} "
            f"multiplications; it is fitted up to {MATRIX_MAX_CLASSES} classes. At {k} "
            "classes use sms (a full map whose fixed penalties need one fit of a few "
            "steps, where memory allows) or a map with a few parameters a class: svs, vs, "
            "ets or ts."
        )


def packed_features(features: np.ndarray) -> np.ndarray:
    """``features`` (n, k) copied into the first k columns of an (n, k + 1) array whose
    last column is 1, and returned as that (n, k) view: `fit_multinomial` then multiplies
    the array itself as ``[x | 1]`` (`features_with_ones`), where it would otherwise copy ``x``
    (at 25,000 x 1,000, 200 MB of a fit's peak)."""
    n, k = features.shape
    xt = np.empty((n, k + 1), dtype=features.dtype)
    xt[:, :k], xt[:, k] = features, 1.0
    return xt[:, :k]


def features_with_ones(x: np.ndarray, offset, precision: str):
    """``([x | 1] in precision, offset)`` for the CPU fit: the array ``x`` is the first k
    columns of (`packed_features`) where it is one, C-contiguous, in ``precision``, and
    then an offset that is ``x`` itself read through its strides (the same numbers, no
    copy); else a new array, and the offset made contiguous."""
    n, k = x.shape
    base = x.base
    packed = (
        base is not None
        and base.dtype == precision
        and base.shape == (n, k + 1)
        and base.flags.c_contiguous
        and base.__array_interface__["data"][0] == x.__array_interface__["data"][0]
        and base.strides == x.strides
        and bool((base[:, k] == 1.0).all())
    )
    if packed and offset is x:
        return base, x
    if packed:
        xt = base
    else:
        xt = np.empty((n, k + 1), dtype=precision)  # no float64 copy on the way to float32
        xt[:, :k], xt[:, k] = x, 1.0
    return xt, None if offset is None else np.ascontiguousarray(offset)
