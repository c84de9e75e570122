"""``store/data_names.tsv``: which of the user's files each data set name of an experiment
stands for, so that two different models' scores never share one table row.

An index of what the cells' configs already say (``dataset`` and ``data`` in each), kept so
a sweep's cells need not read every config: one line per (experiment, name, paths, content),
each ending in a checksum of its fields. It is checked as every store file is: a line that
is not whole or not text is damage (`problems`, which ``calbench store verify`` reports), and
a cell of the user's files whose line is missing means the index was removed or cut; both
are mended by rebuilding it from the configs (`rebuild`: ``store verify --repair``, and a
run that finds the file gone).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError

FILE_NAME = "data_names.tsv"


def _checksum(fields: list[str]) -> str:
    return hashlib.sha256("\t".join(fields).encode()).hexdigest()[:16]


def entry_of(config: dict) -> list[str] | None:
    """The index line of a stored cell's config: (experiment, name, paths, content), None
    for a cell of registered or generated data."""
    from calbench.data.identity import default_name

    data = config.get("data") or {}
    if not data.get("files") or not data.get("paths"):
        return None
    name = default_name(config["dataset"])
    content = "+".join(str(f.get("sha256")) for f in data["files"])
    return [str(config.get("experiment")), str(name), "|".join(data["paths"]), content]


class DataNames:
    """The index under a store's root."""

    def __init__(self, root: Path):
        self.path = Path(root) / FILE_NAME

    def entries(self) -> list[list[str]]:
        """Every line's four fields; one error naming the file where it is damaged."""
        problem = self.damage()
        if problem:
            raise CalbenchError(
                f"{self.path}: {problem}; `calbench store verify --repair` rebuilds it from "
                "the cells' configs."
            )
        return self._read()

    def _read(self) -> list[list[str]]:
        if not self.path.is_file():
            return []
        lines = self.path.read_bytes().decode("utf-8").splitlines()
        return [line.split("\t")[:4] for line in lines if line]

    def damage(self) -> str | None:
        """What is wrong with the file's lines (None: nothing, or no file)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            return "it is not text (damaged)"
        if data and not data.endswith(b"\n"):
            return "its last line is cut short"
        for number, line in enumerate(lines, start=1):
            fields = line.split("\t")
            # Four fields: a line an earlier calbench wrote, before lines were checksummed.
            if len(fields) == 5 and _checksum(fields[:4]) == fields[4] or len(fields) == 4:
                continue
            return f"line {number} does not match its checksum (cut or edited)"
        return None

    def missing(self, configs: dict[str, dict]) -> list[str]:
        """The cells (of ``configs``, by hash) of the user's files that no line names."""
        known = {tuple(e) for e in self._read()} if self.damage() is None else set()
        return sorted(
            cell
            for cell, config in configs.items()
            if (entry := entry_of(config)) is not None and tuple(entry) not in known
        )

    def rebuild(self, configs: dict[str, dict]) -> None:
        """Write the index afresh from the cells' configs."""
        entries = {tuple(e) for c in configs.values() if (e := entry_of(c)) is not None}
        text = "".join(_line(list(e)) for e in sorted(entries))
        atomic_write_text(self.path, text)

    def claim(self, experiment: str, name: str, data: dict, configs) -> None:
        """Record that data set ``name`` of ``experiment`` is the user's files ``data``
        (`calbench.data.identity`), or refuse it where other files already carry that name
        there: tables would average the two models into one row. The same files with new
        content (scores written again) keep their name. ``configs``: a callable giving the
        store's configs, read only where the index must be rebuilt (it is gone)."""
        if not self.path.is_file():
            self.rebuild(configs())
        paths = "|".join(data["paths"])
        content = "+".join(str(f["sha256"]) for f in data["files"])
        entries = self.entries()
        for known_experiment, known_name, known_paths, known_content in entries:
            if (known_experiment, known_name) != (experiment, name) or known_paths == paths:
                continue
            if known_content != content:
                raise CalbenchError(
                    f"Data set name {name!r} in experiment {experiment!r} already names "
                    f"{known_paths.replace('|', ' + ')}; {paths.replace('|', ' + ')} holds "
                    "other scores, and tables would average the two into one row. Give it a "
                    f"name of its own: dataset.name={name}_2 (or any other)."
                )
        entry = [experiment, name, paths, content]
        if entry not in entries:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:  # one short append: atomic on a local disk
                f.write(_line(entry))
                f.flush()
                os.fsync(f.fileno())


def _line(fields: list[str]) -> str:
    return "\t".join([*fields, _checksum(fields)]) + "\n"
