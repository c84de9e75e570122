"""What a cell computed with, where that is code outside the installed calbench release.

A cell's identity is its configuration and its data (`calbench.data.identity`); the code of
calbench's own calibrators is the release's, named by ``calbench_version`` in every row. A
researcher's own calibrator (``method.calibrator=my_module:MyClass``, or a class of a paper
pack from ``CALBENCH_PAPER_PACKS``) is code she edits all day: the same command run after an
edit must compute again, never serve the numbers of the code before. So the cell's hash also
takes the SHA-256 of each source file of that code: the class's module, the modules of the
classes it derives from, and every module of hers that those import, anywhere in their
source (read with `ast`, so an import inside a function counts and nothing is run). Code in
the standard library, in installed packages (site-packages) and in calbench itself is not
hers: the versions in each row name it.

The identity is stored beside the cell (``code`` in its config), so tables keep the cells of
the newest code only (`calbench.results.reading.superseded_cells`). A module loaded by a name
computed at run time (``importlib.import_module(name)``) is not found.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import site
import sys
import sysconfig
import types
from pathlib import Path

from calbench.calibrators.base import calibrators_within
from calbench.data.identity import file_sha256
from calbench.errors import CalbenchError

#: Each module's SHA-256 when this process first took it: a module edited after it was
#: imported here runs its old code, which its file no longer identifies.
_FIRST_SEEN: dict[str, str] = {}


@functools.cache
def _not_hers() -> tuple[Path, ...]:
    """The folders whose modules are calbench's, the standard library's or installed."""
    import calbench

    paths = sysconfig.get_paths()
    folders = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    folders += [*site.getsitepackages(), site.getusersitepackages()]
    folders.append(str(Path(calbench.__file__).parent))
    return tuple(Path(f).resolve() for f in folders if f)


def _source(file: str | None) -> Path | None:
    """A module's source ``file`` where it is the user's code, else None."""
    if not file or not file.endswith(".py"):
        return None
    path = Path(file).resolve()
    if any(path.is_relative_to(folder) for folder in _not_hers()):
        return None
    return path


def _reached(start: list[types.ModuleType]) -> dict[str, Path]:
    """The user's modules among ``start`` and every one of hers their imports reach."""
    found: dict[str, Path] = {}
    queue = [(m.__name__, _source(getattr(m, "__file__", None))) for m in start]
    while queue:
        name, path = queue.pop()
        if path is None or name in found:
            continue
        found[name] = path
        queue.extend((imported, _module_file(imported)) for imported in _imports(path, name))
    return found


def _imports(path: Path, name: str) -> set[str]:
    """The modules a source file imports, anywhere in it (a function's imports too):
    ``import a.b`` and ``from a import b`` give ``a.b`` and ``a``, relative ones resolved."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                keep = len(parts) - (node.level - 1)
                if keep < 0 or (keep == 0 and not base):
                    continue
                base = ".".join([*parts[:keep], *([base] if base else [])])
            modules.add(base)
            modules.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in modules if m}


def _module_file(name: str) -> Path | None:
    """The user's source file of module ``name`` (found without running it where it is
    not imported yet), None where it is not hers or not a module."""
    module = sys.modules.get(name)
    if module is not None:
        return _source(getattr(module, "__file__", None))
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin:
        return None
    return _source(spec.origin)


def code_identity(calibrator) -> dict | None:
    """``{"modules": [{"module": NAME, "file": FILE, "sha256": ...}, ...]}`` for the user's
    code the calibrator runs (sorted by module), None where it runs calbench's alone."""
    classes = {type(c) for c in calibrators_within(calibrator)}
    start = [sys.modules.get(k.__module__) for cls in classes for k in cls.__mro__]
    modules = _reached([m for m in start if m is not None])
    if not modules:
        return None
    entries = []
    for name, path in sorted(modules.items()):
        sha256 = file_sha256(path)
        if _FIRST_SEEN.setdefault(name, sha256) != sha256:
            raise CalbenchError(
                f"{path} changed after this Python process imported it, so its old code "
                "would run under the new file's identity: start a new process (or "
                f"importlib.reload({name})) and run again."
            )
        entries.append({"module": name, "file": path.name, "sha256": sha256})
    return {"modules": entries}
