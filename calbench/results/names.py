"""The store's name indexes: ``store/data_names.tsv``, which of the user's files each data
set name of an experiment stands for, so that two different models' scores never share one
table row; and ``store/method_names.tsv``, which calibrator each method name of an experiment
stands for, so that a class of yours named like a registered method (``fixed_t``) never
shares its column.

Each is an index of what the cells' configs already say, kept so a sweep's cells need not
read every config: one line per entry, ending in a checksum of its fields. Each is checked
as every store file is: a line that is not whole or not text is damage (`DataNames.damage`,
which ``calbench store verify`` reports), and a cell whose line is missing means the index
was removed or cut; both are mended by rebuilding it from the configs
(`DataNames.rebuild`: ``store verify --repair``, and a run that finds the file gone).
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


def data_entry(config: dict) -> list[str] | None:
    """The data index's line of a stored cell's config: (experiment, name, paths,
    content), None for a cell of registered or generated data."""
    from calbench.data.identity import user_files_name

    data = config.get("data") or {}
    if not data.get("files") or not data.get("paths"):
        return None
    name = user_files_name(config["dataset"])
    content = "+".join(str(f.get("sha256")) for f in data["files"])
    return [str(config.get("experiment")), str(name), "|".join(data["paths"]), content]


def method_entry(config: dict) -> list[str] | None:
    """The method index's line of a stored cell's config: (experiment, method name, the
    calibrator it names); None for an imported cell (no calibrator)."""
    method = config.get("method") or {}
    if not method.get("name") or not method.get("calibrator"):
        return None
    return [str(config.get("experiment")), str(method["name"]), str(method["calibrator"])]


class DataNames:
    """The data-name index under a store's root."""

    file_name = FILE_NAME
    entry_of = staticmethod(data_entry)
    width = 4  # fields of a line, before its checksum
    legacy_width = 4  # a line an earlier calbench wrote, before lines had checksums

    def __init__(self, root: Path):
        self.path = Path(root) / self.file_name

    def entries(self) -> list[list[str]]:
        """Every line's fields; one error naming the file where it is damaged."""
        entries, problem = self._parsed()
        if problem:
            raise CalbenchError(
                f"{self.path}: {problem}; `calbench store verify --repair` rebuilds it from "
                "the cells' configs."
            )
        return entries

    def damage(self) -> str | None:
        """What is wrong with the file's lines (None: nothing, or no file)."""
        return self._parsed()[1]

    def _parsed(self) -> tuple[list[list[str]], str | None]:
        """The file read once: its lines' fields, and what is wrong with them."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], None
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            return [], "it is not text (damaged)"
        if data and not data.endswith(b"\n"):
            return [], "its last line is cut short"
        entries = []
        for number, line in enumerate(lines, start=1):
            fields = line.split("\t")
            whole = len(fields) == self.width + 1 and _checksum(fields[:-1]) == fields[-1]
            if not (whole or len(fields) == self.legacy_width):
                return [], f"line {number} does not match its checksum (cut or edited)"
            entries.append(fields[: self.width])
        return entries, None

    def missing(self, configs: dict[str, dict]) -> list[str]:
        """The cells (of ``configs``, by hash) that no line names, where the index exists
        (one that is gone is rebuilt by the next run that needs it: no damage)."""
        if not self.path.is_file():
            return []
        known = {tuple(e) for e in self._parsed()[0]}
        return sorted(
            cell
            for cell, config in configs.items()
            if (entry := self.entry_of(config)) is not None and tuple(entry) not in known
        )

    def rebuild(self, configs: dict[str, dict]) -> None:
        """Write the index afresh from the cells' configs."""
        entries = {tuple(e) for c in configs.values() if (e := self.entry_of(c)) is not None}
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
        self._append([experiment, name, paths, content], entries)

    def _append(self, entry: list[str], entries: list[list[str]]) -> None:
        if entry not in entries:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:  # one short append: atomic on a local disk
                f.write(_line(entry))
                f.flush()
                os.fsync(f.fileno())


class MethodNames(DataNames):
    """The method-name index under a store's root."""

    file_name = "method_names.tsv"
    entry_of = staticmethod(method_entry)
    width = 3
    legacy_width = None

    def claim(self, experiment: str, name: str, calibrator: str, configs) -> None:
        """Record that method ``name`` of ``experiment`` is ``calibrator``, or refuse it
        where that name already stands for another calibrator there: tables would merge
        two methods into one column. ``configs`` as `DataNames.claim`'s."""
        if not self.path.is_file():
            self.rebuild(configs())
        entries = self.entries()
        for known_experiment, known_name, known_calibrator in entries:
            if (known_experiment, known_name) == (experiment, name) and (
                known_calibrator != calibrator
            ):
                raise CalbenchError(
                    f"Method name {name!r} in experiment {experiment!r} already names "
                    f"{known_calibrator}; {calibrator} is another method, and tables would "
                    f"merge the two into one column. Give it a name of its own: "
                    f"method.name={name}_2 (or any other)."
                )
        self._append([experiment, name, calibrator], entries)


def _line(fields: list[str]) -> str:
    return "\t".join([*fields, _checksum(fields)]) + "\n"
