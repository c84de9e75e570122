"""Atomic writes: whole files or none, with the mode any other tool would give them."""

import os
import stat

import pytest

from calbench.atomic import atomic_tmp_path, atomic_write_text


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_written_files_follow_the_umask(tmp_path, umask):
    """mkstemp's 0600 would hide a shared results folder's cells from its other users."""
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "cell.csv", "a,b\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "cell.csv").stat().st_mode) == 0o666 & ~umask


def test_a_failed_write_leaves_neither_file_nor_temporary(tmp_path):
    with pytest.raises(RuntimeError), atomic_tmp_path(tmp_path / "x.bin") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
