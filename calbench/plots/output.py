"""Figures as files: a headless backend and one way to write a figure (PNG, PDF, ...)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: figures are files, never windows
import matplotlib.pyplot as plt  # noqa: E402


def save_figure(fig, out_dir, name: str, formats=("png", "pdf")) -> list[Path]:
    """Write ``fig`` as ``<out_dir>/<name>.<format>`` for each format, then close it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    name = file_stem(name)
    for fmt in formats:
        path = out_dir / f"{name}.{fmt}"
        fig.savefig(path, dpi=160, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths


#: The longest figure file stem: a file system's 255 bytes less room for the suffix.
MAX_STEM_BYTES = 200


def file_stem(name: str) -> str:
    """``name``, or where it is too long for a file name (an experiment, a data set and a
    classifier of up to 100 characters each) its start and a hash of the whole, so two
    long names never share a file."""
    import hashlib

    if len(name.encode()) <= MAX_STEM_BYTES:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return name.encode()[: MAX_STEM_BYTES - 13].decode(errors="ignore") + "_" + digest
