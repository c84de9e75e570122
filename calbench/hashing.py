"""Stable hashes of plain configurations (a ground module: cells, caches and data stand-ins
are all named by one)."""

from __future__ import annotations

import hashlib
import json


def config_hash(config: dict) -> str:
    """A stable 16-hex-digit hash of a plain (resolved) configuration."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
