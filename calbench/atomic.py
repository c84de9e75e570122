"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

Everything calbench writes for later runs (result cells, cached scores, tables) goes through
a temporary file in the target's directory, flushed to disk, then renamed over the target.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

import numpy as np

from calbench.errors import CalbenchError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sync_directory(folder: Path) -> None:
    """Make a rename durable: until the folder's entry is on disk, a power cut can undo it
    even though the file's bytes were synced."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform without directory handles (Windows): nothing to sync
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse to sync a directory; the rename still happened
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_tmp_path(path):
    """Yield a temporary path beside ``path``; on success it is renamed over ``path``.

    mkstemp creates files readable by their owner alone; the finished file gets the mode any
    other tool would give it under the user's umask, so a shared results folder stays shared.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        _sync_directory(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    with atomic_tmp_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_save_npz(path, **arrays) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


@contextlib.contextmanager
def writable(root):
    """A failed write under ``root`` (read-only, full, a file where a folder should be) as
    one error naming it, instead of a traceback from deep inside; atomic writes leave
    nothing half-written behind."""
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        yield
    except OSError as exc:
        from calbench.errors import file_fault

        raise CalbenchError(
            f"Cannot write to {root}: {file_fault(exc)} Nothing half-written was kept."
        ) from None
