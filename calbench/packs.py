"""Paper packs: where each paper's reproduction lives, found by looking, never imported by name.

A pack is a folder with a ``pack.yaml``: calbench's own under ``calbench/papers/`` and a
user's in any folder listed in ``CALBENCH_PAPER_PACKS`` (separated as ``PATH`` is), so a
researcher adds a paper without editing calbench. A pack holds

- ``pack.yaml``: ``title``, ``paper`` (the name its published numbers, notes and claims
  carry in their ``paper`` column), ``citation``, and ``reproduce_all`` (the presets that
  ``calbench reproduce all`` runs, minutes each);
- ``conf/``: Hydra groups (``experiment``, ``method``, ``table``, ``metrics``) on Hydra's
  search path beside ``calbench/conf`` (``hydra_plugins/calbench_papers``); an option name
  is unique across the library and the packs;
- ``published/*.csv`` (one printed number a row, `calbench.reproduce.published`),
  ``notes.yaml`` (why a number differs), ``claims.yaml`` (the headline claims) and
  ``README.md`` (its page in the docs);
- ``__init__.py`` with the parts it brings, each a dict from a name to the part, registered
  beside the library's own of that kind by `PackRegistry` (a pack may not take a name the
  library or another pack holds): ``CALIBRATORS`` (name -> (class, fixed params), the
  paper's procedure twins), ``METRICS`` (name -> `calbench.metrics.MetricSpec`), ``LOADERS``
  (a data set's ``loader:`` name -> its reader, `calbench.data.LOADERS`), ``PROTOCOLS``
  (name -> (fold generator, the kind of data it takes, its option names),
  `calbench.runner.protocols`), ``VIEWS`` (a data-set config key -> how the loaded set is
  seen, `calbench.data.views`), ``IMPORTERS`` (a published-results layout,
  `calbench.results.importers`), ``LOSS_DRAWS`` (how ``average_loss_gap`` draws its loss
  matrices) and ``KUIPER_ARITHMETIC`` (how ``kuiper_error`` sums its curves); and
  optionally ``report_extra(preset, report, results_dir) -> str`` (Markdown appended to its
  reproduction report).

The library finds packs here and loads their Python only on demand (a name the library does
not know); a pack may import the library, and nothing in the library imports a pack.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from calbench.errors import CalbenchError
from calbench.yaml_text import load_yaml

#: Folders of a user's own packs, separated as PATH is (``os.pathsep``).
PACKS_ENV = "CALBENCH_PAPER_PACKS"


@dataclass(frozen=True)
class PaperPack:
    """One pack: its folder name, folder, module name and ``pack.yaml``."""

    name: str
    folder: Path
    module: str
    meta: dict = field(compare=False, repr=False)

    @property
    def paper(self) -> str:
        return self.meta.get("paper", self.name)

    @property
    def title(self) -> str:
        return self.meta.get("title", self.name)

    def conf_folder(self, group: str | None = None) -> Path:
        return self.folder / "conf" if group is None else self.folder / "conf" / group

    def python(self):
        """The pack's package (its ``__init__``), imported on first use; a user's pack is
        imported from its folder under the module name ``calbench_pack_NAME``."""
        if self.module in sys.modules:
            return sys.modules[self.module]
        if not (self.folder / "__init__.py").is_file():
            return None
        if self.module.startswith("calbench.papers."):
            return importlib.import_module(self.module)
        spec = importlib.util.spec_from_file_location(
            self.module, self.folder / "__init__.py", submodule_search_locations=[str(self.folder)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.module] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[self.module]
            raise CalbenchError(
                f"paper pack {self.name!r} ({self.folder}) failed to import: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return module

    def parts(self, kind: str) -> dict:
        """The pack's parts of one kind (``"CALIBRATORS"``, ``"METRICS"``, ...); a pack
        with no Python brings none."""
        return dict(getattr(self.python(), kind, {}) or {})

    def calibrators(self) -> dict:
        return self.parts("CALIBRATORS")


def _packaged_root() -> Path:
    return Path(str(resources.files("calbench.papers")))


def _pack_folders() -> list[tuple[Path, str]]:
    """(folder, module name) of every pack: calbench's own, then the user's."""
    found = [
        (folder, f"calbench.papers.{folder.name}")
        for folder in sorted(_packaged_root().iterdir())
        if (folder / "pack.yaml").is_file()
    ]
    for root in filter(None, os.environ.get(PACKS_ENV, "").split(os.pathsep)):
        root = Path(root).expanduser()
        if (root / "pack.yaml").is_file():  # the variable may name a pack itself
            candidates = [root]
        elif root.is_dir():
            candidates = sorted(p for p in root.iterdir() if (p / "pack.yaml").is_file())
            if not candidates:  # (it was ignored: her methods then "named no method")
                raise CalbenchError(
                    f"{PACKS_ENV} names {root}, which holds no pack.yaml, nor does any folder "
                    "in it; a pack is a folder with a pack.yaml (one line will do: title: "
                    "My methods) beside its conf/."
                )
        else:
            raise CalbenchError(
                f"{PACKS_ENV} names {root}, which is not a folder; give folders that hold "
                "paper packs (each a folder with a pack.yaml), separated by "
                f"{os.pathsep!r}."
            )
        found += [(p.resolve(), f"calbench_pack_{p.name}") for p in candidates]
    return found


def paper_packs() -> dict[str, PaperPack]:
    """Every pack by name, calbench's first; cached per value of ``CALBENCH_PAPER_PACKS``."""
    return _paper_packs(os.environ.get(PACKS_ENV, ""))


@functools.cache
def _paper_packs(_env: str) -> dict[str, PaperPack]:
    packs = {}
    for folder, module in _pack_folders():
        if folder.name in packs:
            raise CalbenchError(
                f"two paper packs are named {folder.name!r}: {packs[folder.name].folder} and "
                f"{folder}; rename one folder."
            )
        meta = load_yaml((folder / "pack.yaml").read_text()) or {}
        packs[folder.name] = PaperPack(folder.name, folder, module, meta)
        # A user's pack may name its own modules as module:Class (her calibrator beside its
        # YAML): they import from its folder wherever calbench runs (they did only from the
        # folder that held them, and `calbench list methods` failed elsewhere).
        if not module.startswith("calbench.papers.") and str(folder) not in sys.path:
            sys.path.append(str(folder))
    return packs


def pack_files(relative: str) -> list[tuple[PaperPack, Path]]:
    """(pack, path) of the file or folder ``relative`` in every pack that has it."""
    return [
        (pack, pack.folder / relative)
        for pack in paper_packs().values()
        if (pack.folder / relative).exists()
    ]


def pack_entries(file_name: str) -> list[tuple[PaperPack, dict]]:
    """The entries of every pack's YAML list ``file_name`` (``notes.yaml``, ``claims.yaml``),
    with the pack each came from, pack by pack in their order."""
    out = []
    for pack, path in pack_files(file_name):
        entries = load_yaml(path.read_text()) or []
        if not isinstance(entries, list):
            raise CalbenchError(f"{path} must be a YAML list of entries, one per '- ' item.")
        out += [(pack, entry) for entry in entries]
    return out


class PackRegistry(Mapping):
    """The library's parts of one kind and every pack's (``kind`` names the pack attribute,
    ``CALIBRATORS``, ``METRICS``, ...), the packs looked up on first use: a library name is
    answered without loading any pack, and a name is one part (a pack may take neither a
    library name nor another pack's)."""

    def __init__(self, kind: str, library: dict, noun: str):
        self.kind, self.library, self.noun = kind, library, noun
        self._all, self._packs = None, None

    def _merged(self) -> dict:
        packs = paper_packs()  # cached; a new CALBENCH_PAPER_PACKS gives a new dict
        if self._packs is not packs:
            merged, owner = dict(self.library), {}
            for pack in packs.values():
                for name, part in pack.parts(self.kind).items():
                    if name in merged:
                        held = f"pack {owner[name]!r}" if name in owner else "the library"
                        raise CalbenchError(
                            f"paper pack {pack.name!r} registers {self.noun} {name!r}, which "
                            f"{held} already registers; give the pack's {self.noun} its own "
                            "name."
                        )
                    merged[name], owner[name] = part, pack.name
            self._all, self._packs, self._owner = merged, packs, owner
        return self._all

    def pack_of(self, name: str) -> str | None:
        """The pack that registers ``name``; None for the library's own."""
        if name in self.library:
            return None
        self._merged()
        return self._owner.get(name)

    def __getitem__(self, name):
        if name in self.library:  # the library's own: no pack is loaded for them
            return self.library[name]
        return self._merged()[name]

    def __contains__(self, name):
        return name in self.library or name in self._merged()

    def __iter__(self):
        return iter(self._merged())

    def __len__(self):
        return len(self._merged())
