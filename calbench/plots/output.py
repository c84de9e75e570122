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
    for fmt in formats:
        path = out_dir / f"{name}.{fmt}"
        fig.savefig(path, dpi=160, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths
