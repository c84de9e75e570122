"""The memory this process can still allocate, so that a fit too large for the machine is
refused before any work rather than failing inside scipy minutes later (or being killed)."""

from __future__ import annotations

import os
from pathlib import Path

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
