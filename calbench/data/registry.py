"""The registry of data sets the papers use: the ``registry:`` block of each
``conf/dataset/*.yaml`` (classes, sizes, files with source URL and SHA-256, papers).

A block looks like::

    registry:
      kind: logits            # or probabilities, generated, or features (tabular)
      source: {repository: owner/name, path: ..., commit: ...}   # networks not a paper's own
      licence: Apache-2.0
      accuracy: 0.9109        # the source's test accuracy (checked by the tests)
      classes: 10
      n_cal: 5000
      n_test: 10000
      papers: [Kull, Valk]
      files:
        - name: probs_densenet40_c10_logits.p
          sha256: 4d23...      # the published sum; null: none is known (see below)
          bytes: 720341
          urls: [https://..., https://...]   # tried in order; []: supply the file yourself

No trust on first use: a registered file counts as present only when its SHA-256 equals the
registry's; a file whose sum the registry does not know is never unpickled unless the user
passes ``dataset.trusted=true``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from calbench.conf_files import read_group, swept_values
from calbench.data.fetch import sha256_of


@dataclass
class RegisteredFile:
    name: str
    sha256: str | None = None
    bytes: int | None = None
    urls: list[str] = field(default_factory=list)


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
    #: Where the files come from (repository, path, commit) and under which licence: for
    #: the networks that are not a paper's own.
    source: dict = field(default_factory=dict)
    licence: str = ""
    #: The test accuracy its source states; the loader's tests check it.
    accuracy: float | None = None

    @property
    def describes_kind(self) -> str:
        """The kind in words: a set of probabilities says what methods on logits receive."""
        if self.kind == "probabilities":
            return "probabilities (logit methods get ln p)"
        return self.kind


def registered_sets() -> dict[str, RegisteredSet]:
    sets = {}
    for name, config in read_group("dataset").items():
        block = config.get("registry")
        if not block:
            continue
        sets[name] = RegisteredSet(
            name=name,
            kind=block.get("kind", "logits"),
            classes=block.get("classes"),
            n_cal=block.get("n_cal"),
            n_test=block.get("n_test"),
            papers=list(block.get("papers", [])),
            files=[RegisteredFile(**f) for f in block.get("files", [])],
            note=block.get("note", ""),
            source=dict(block.get("source") or {}),
            licence=block.get("licence", ""),
            accuracy=block.get("accuracy"),
        )
    return sets


def experiments_using() -> dict[str, list[str]]:
    """Data set name -> experiment presets that sweep over it (a preset that builds on
    another, as kull_uci_full on kull_uci, sweeps that one's data sets too)."""
    swept: dict[str, list[str]] = {}
    parents: dict[str, list[str]] = {}
    for preset, config in read_group("experiment").items():
        names = swept_values(config, "dataset")
        for item in config.get("defaults", []):
            if isinstance(item, dict) and "override /dataset" in item:
                names.append(item["override /dataset"])
        swept[preset] = names
        parents[preset] = [i for i in config.get("defaults", []) if isinstance(i, str)]
    using: dict[str, list[str]] = {}
    for preset in swept:
        names = swept[preset] + [n for p in parents[preset] for n in swept.get(p, [])]
        for name in dict.fromkeys(names):
            using.setdefault(name, []).append(preset)
    return using


def file_status(registered: RegisteredFile, data_dir) -> str:
    """present (the registry's checksum, equal), present-unverified (no checksum known),
    mismatch, or absent."""
    path = Path(data_dir) / registered.name
    if not path.is_file():
        return "absent"
    if registered.sha256 is None:
        return "present-unverified"
    return "present" if sha256_of(path) == registered.sha256 else "mismatch"


def published_checksums() -> set[str]:
    """The SHA-256 sums the registry lists: the only files unpickled without trusted=true."""
    return {f.sha256 for s in registered_sets().values() for f in s.files if f.sha256}
