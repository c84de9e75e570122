"""The registry of data sets the papers use: the ``registry:`` block of each
``conf/dataset/*.yaml`` (classes, sizes, files with source URL and SHA-256, papers).

A block looks like::

    registry:
      kind: logits            # or probabilities, generated, or features (tabular)
      classes: 10
      n_cal: 5000
      n_test: 10000
      papers: [Kull, Valk]
      files:
        - name: probs_densenet40_c10_logits.p
          url: https://...     # null: not publicly downloadable; supply the file yourself
          sha256: null         # null: not yet recorded; the first fetch records it
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from calbench.data.fetch import recorded_checksums, sha256_of


@dataclass
class RegisteredFile:
    name: str
    url: str | None = None
    sha256: str | None = None


@dataclass
class RegisteredSet:
    name: str
    kind: str
    classes: int | None
    n_cal: int | None
    n_test: int | None
    papers: list[str]
    files: list[RegisteredFile] = field(default_factory=list)
    note: str = ""


def _conf(folder: str):
    return resources.files("calbench.conf").joinpath(folder)


def registered_sets() -> dict[str, RegisteredSet]:
    sets = {}
    for entry in sorted(_conf("dataset").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        block = (yaml.safe_load(entry.read_text()) or {}).get("registry")
        if not block:
            continue
        name = entry.name[: -len(".yaml")]
        sets[name] = RegisteredSet(
            name=name,
            kind=block.get("kind", "logits"),
            classes=block.get("classes"),
            n_cal=block.get("n_cal"),
            n_test=block.get("n_test"),
            papers=list(block.get("papers", [])),
            files=[RegisteredFile(**f) for f in block.get("files", [])],
            note=block.get("note", ""),
        )
    return sets


def experiments_using() -> dict[str, list[str]]:
    """Data set name -> experiment presets that sweep over it."""
    using: dict[str, list[str]] = {}
    for entry in sorted(_conf("experiment").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        config = yaml.safe_load(entry.read_text()) or {}
        params = (((config.get("hydra") or {}).get("sweeper") or {}).get("params")) or {}
        names = [d.strip() for d in str(params.get("dataset", "")).split(",") if d.strip()]
        for item in config.get("defaults", []):
            if isinstance(item, dict) and "override /dataset" in item:
                names.append(item["override /dataset"])
        for name in names:
            using.setdefault(name, []).append(entry.name[: -len(".yaml")])
    return using


def file_status(registered: RegisteredFile, data_dir) -> str:
    """present (checksum known and equal), present-unverified, mismatch, or absent."""
    path = Path(data_dir) / registered.name
    if not path.is_file():
        return "absent"
    expected = registered.sha256 or recorded_checksums(data_dir).get(registered.name)
    if expected is None:
        return "present-unverified"
    return "present" if sha256_of(path) == expected else "mismatch"


def trusted_checksums(data_dir) -> set[str]:
    """SHA-256 sums of files the registry lists or calbench fetched into ``data_dir``."""
    known = {f.sha256 for s in registered_sets().values() for f in s.files if f.sha256}
    return known | set(recorded_checksums(data_dir).values())
