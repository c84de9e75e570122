"""One writer per cell at a time, across processes and machines sharing a store's folder.

A cell's lock is an advisory ``flock`` on ``<results_dir>/.locks/<hash>.lock`` (beside the
store, not in it: a run that fails before it stores anything leaves no store behind). The
kernel releases it when its holder exits, killed or not, so a lock left by a dead run is
never stale: the next writer takes it at once. Held around compute-and-write (two sweeps
that plan the same cell compute it once; the second finds it stored) and around `calbench
rescore`'s read-modify-write of a cell (two rescores at once both keep their metrics). Under
the lock the cell's leftover temporary files, which only a killed writer leaves, are
removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

from calbench.atomic import writable


@contextlib.contextmanager
def cell_lock(store_root: Path, cell_hash: str, label: str = ""):
    """Hold cell ``cell_hash``'s lock for the ``with`` block (waiting, with one line on
    stderr, while another process holds it)."""
    folder = Path(store_root).parent / ".locks"
    with writable(folder):
        fd = os.open(folder / f"{cell_hash}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"[wait] {label or cell_hash}: another calbench process is writing this cell; "
                "waiting for it.",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        _remove_leftovers(Path(store_root), cell_hash)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _remove_leftovers(root: Path, cell_hash: str) -> None:
    """The cell's temporary files (`calbench.atomic`: ``.<name>.<random>.tmp``): only a
    writer killed before its rename leaves them, and the lock says none is writing now."""
    for leftover in root.glob(f".{cell_hash}.*.tmp"):
        leftover.unlink(missing_ok=True)
