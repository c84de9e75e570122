"""The calibrators' room (`calbench.calibrators`): maps grouped by family, the solvers apart,
registration found by looking, and every module and function small enough to read."""

import ast
import sys
from pathlib import Path

import pytest

from tests.test_architecture import import_graph

ROOM = Path(__file__).resolve().parents[1] / "calbench" / "calibrators"
#: The modules at the room's root: the contract and the machinery every family shares, not
#: a family (no module here registers a calibrator).
ROOT_MODULES = {
    "__init__",
    "base",
    "binary",
    "bounds",
    "composition",
    "constraints",
    "float32",
    "methods",
    "optional",
    "parametric",
    "registry",
}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules():
    return sorted(ROOM.rglob("*.py"))


def test_solvers_import_no_map():
    """`calbench.calibrators.solvers` fits what it is handed (arrays, a penalty, a model to
    warn through) and imports no calibrator: only other solvers, the parameter constraints
    and the ground modules."""
    allowed = ("calbench.calibrators.solvers", "calbench.calibrators.constraints")
    wrong = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.startswith("calbench.calibrators.solvers")
        for target in targets
        if target.startswith("calbench.calibrators") and not target.startswith(allowed)
    ]
    assert wrong == []


def test_every_registered_library_class_lives_in_a_family_subpackage():
    from calbench.calibrators.registry import LIBRARY_CALIBRATORS, NOT_FAMILIES, family

    for name, (cls, _) in LIBRARY_CALIBRATORS.items():
        parts = cls.__module__.split(".")
        assert len(parts) == 4 and parts[:2] == ["calbench", "calibrators"], (name, parts)
        assert parts[2] not in NOT_FAMILIES, (name, cls.__module__)
        assert family(cls) == parts[2]
    root = {p.stem for p in ROOM.glob("*.py")}
    assert root == ROOT_MODULES, root ^ ROOT_MODULES


def test_each_name_is_registered_beside_its_class():
    """A family module's ``REGISTERED`` names its own classes only, and together they are
    `LIBRARY_CALIBRATORS`: registry.py lists none."""
    import importlib

    from calbench.calibrators.registry import LIBRARY_CALIBRATORS, family_modules

    found = {}
    for name in family_modules():
        for key, (cls, fixed) in (
            importlib.import_module(name).__dict__.get("REGISTERED") or {}
        ).items():
            assert cls.__module__ == name, (key, cls.__module__, name)
            assert isinstance(fixed, dict)
            found[key] = (cls, fixed)
    assert found == LIBRARY_CALIBRATORS
    assert "LIBRARY_CALIBRATORS: dict" in (ROOM / "registry.py").read_text()
    assert "REGISTERED = {" not in (ROOM / "registry.py").read_text()


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOM)))
def test_modules_and_functions_are_small(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


NEW_FAMILY = '''
from calbench.calibrators.base import Calibrator
from calbench.simplex import softmax


class Halved(Calibrator):
    """Parameters
    ----------
    None
    """

    def _fit(self, logits, y):
        pass

    def _predict_proba(self, logits):
        return softmax(logits / 2)


REGISTERED = {"halved_test_only": (Halved, {})}
'''


def _with_family(tmp_path, monkeypatch, source, module="maps"):
    """A family subpackage written to ``tmp_path`` and put on the room's package path, as
    a new family folder would be, without editing registry.py."""
    import calbench.calibrators as room

    family = tmp_path / "extra_family"
    family.mkdir()
    (family / "__init__.py").write_text("")
    (family / f"{module}.py").write_text(source)
    monkeypatch.setattr(room, "__path__", [*room.__path__, str(tmp_path)])
    for name in [m for m in sys.modules if m.startswith("calbench.calibrators.extra_family")]:
        monkeypatch.delitem(sys.modules, name)
    return room


def test_a_calibrator_in_a_new_module_is_found_without_editing_the_registry(tmp_path, monkeypatch):
    from calbench.calibrators.registry import family, library_calibrators

    _with_family(tmp_path, monkeypatch, NEW_FAMILY)
    found = library_calibrators()
    cls, fixed = found["halved_test_only"]
    assert cls.__module__ == "calbench.calibrators.extra_family.maps" and fixed == {}
    assert family(cls) == "extra_family"
    assert "ts" in found  # beside every other family's


def test_two_modules_registering_one_name_is_an_error_naming_both(tmp_path, monkeypatch):
    from calbench.calibrators.registry import library_calibrators
    from calbench.errors import CalbenchError

    clash = NEW_FAMILY.replace('"halved_test_only"', '"ts"')
    _with_family(tmp_path, monkeypatch, clash)
    with pytest.raises(
        CalbenchError,
        match=r"'ts' is registered twice: by .*scaling.temperature and by .*extra_family.maps",
    ):
        library_calibrators()


def test_the_registry_module_imports_no_family():
    """registry.py finds the families by walking the package (pkgutil): it names none."""
    targets = import_graph()["calbench.calibrators.registry"]
    families = {p.name for p in ROOM.iterdir() if (p / "__init__.py").is_file()}
    assert not [t for t in targets if t.split(".")[2:3] and t.split(".")[2] in families]


def test_no_module_of_the_room_names_a_paper():
    """CalArena's methods live in their families under their own names; no module of the
    room is named for a paper's code base."""
    assert not [p for p in ROOM.rglob("*.py") if "calarena" in p.stem]
