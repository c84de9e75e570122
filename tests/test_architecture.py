"""The package's import graph: no cycle, and the lower rooms import nothing above them."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "calbench"

#: Rooms that everything else builds on: they may import each other (without a cycle) and
#: the ground modules, never the runner, tables, plots, reproduction or the CLIs.
LOWER = (
    "calbench.data",
    "calbench.metrics",
    "calbench.calibrators",
    "calbench.criteria",
    "calbench.decision",
)
UPPER = (
    "calbench.runner",
    "calbench.stats",
    "calbench.tables",
    "calbench.plots",
    "calbench.reproduce",
    "calbench.cli",
    "calbench.report",
    "calbench.papers",
)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the calbench modules it imports, inside functions too: a late import
    (for start-up time) is still a dependency, and a cycle through one is still a cycle."""
    paths = list(PACKAGE.rglob("*.py"))
    modules = {_module(p) for p in paths}
    graph = {}
    for path in paths:
        tree = ast.parse(path.read_text())
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from package import submodule` imports the submodule.
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        graph[_module(path)] = {t for t in targets if t.startswith("calbench")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (a path that returns to its start), or None."""
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*trail, node, nxt]
            if nxt not in state:
                found = visit(nxt, [*trail, node])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_lower_rooms_import_nothing_above_them():
    upward = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.startswith(LOWER)
        for target in targets
        if target.startswith(UPPER)
    ]
    assert not upward, upward


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_the_rooms_import_one_way():
    """Between rooms (calbench.X): tables never import plots (figures build on tables), no
    room imports the command line (calbench.cli only parses arguments and calls them), and
    the rooms' graph has no cycle."""
    graph = import_graph()
    edges = {(_room(m), _room(t)) for m, ts in graph.items() for t in ts if _room(m) != _room(t)}
    assert ("calbench.tables", "calbench.plots") not in edges
    assert not [e for e in edges if e[1] == "calbench.cli"], edges
    rooms = {}
    for a, b in edges:
        rooms.setdefault(a, set()).add(b)
    cycle = find_cycle(rooms)
    assert cycle is None, "rooms import each other: " + " -> ".join(cycle)


def test_argument_parsing_lives_in_the_command_line_package():
    parsers = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "ArgumentParser(" in path.read_text() and path.parent.name != "cli"
    ]
    assert parsers == []


@pytest.mark.parametrize(
    "modules",
    [
        "calbench.metrics",
        # A run, the tables and the figures import torch only when a torch-fitted
        # calibrator or criterion is used (about 2 s of each command's start-up).
        "calbench.runner.job, calbench.tables.write, calbench.plots.write, calbench.calibrators",
    ],
)
def test_torch_is_imported_only_when_used(modules):
    code = f"import sys, {modules}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_the_runner_resolves_the_config_in_one_place():
    """`calbench.runner.spec.CellSpec.of` turns the Hydra config into plain records; the
    rest of the runner reads those."""
    calls = {
        path.name: path.read_text().count("OmegaConf.to_container")
        for path in (PACKAGE / "runner").glob("*.py")
    }
    assert {name: n for name, n in calls.items() if n} == {"spec.py": 1}


def _calls(name: str) -> dict[str, int]:
    """Module -> how many calls of ``name`` (a function or ``Class.method``) it makes."""
    counts = {}
    for path in PACKAGE.rglob("*.py"):
        n = sum(
            isinstance(node, ast.Call) and ast.unparse(node.func).endswith(name)
            for node in ast.walk(ast.parse(path.read_text()))
        )
        if n:
            counts[_module(path)] = n
    return counts


@pytest.mark.parametrize(
    "call, home",
    [
        ("CellSpec.of", "calbench.runner.plan"),  # the config resolved once, at the entrance
        ("decision_task", "calbench.runner.plan"),  # the decision task built in one place
        ("Protocol.of", "calbench.runner.plan"),  # the protocol read by one reader
        ("plan_cell", "calbench.cli"),  # the CLI's one entrance into the runner
    ],
)
def test_a_cell_is_planned_once_and_in_one_place(call, home):
    """The cell plan (`calbench.runner.plan`) builds every object of a cell from its config;
    nothing below it re-reads or rebuilds them."""
    assert _calls(call) == {home: 1}


def test_a_method_config_becomes_a_calibrator_in_one_place():
    """`calbench.calibrators.methods.method_from_config`: the run's plan calls it once, and
    Python's `make_calibrator` / `method` go through it too (one meaning per name)."""
    assert _calls("method_from_config") == {
        "calbench.runner.plan": 1,
        "calbench.calibrators.methods": 1,
    }
    assert not [m for m in _calls("make_calibrator") if m.startswith("calbench.runner")]
    assert not [m for m in _calls("registered_calibrator") if m.startswith("calbench.runner")]


def test_nothing_in_the_library_imports_a_paper_pack():
    """The packs (`calbench.papers`) build on the library; the library finds them by looking
    (`calbench.packs`) and never names one. A pack imports no other pack either."""
    pack_of = {m: m.split(".")[2] for m in import_graph() if m.startswith("calbench.papers.")}
    wrong = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if target.startswith("calbench.papers")
        and target != "calbench.papers"
        and pack_of.get(module) != target.split(".")[2]
    ]
    assert not wrong, wrong


def test_calibrators_holds_the_librarys_methods_and_each_twin_lives_in_its_pack():
    """Every calibrator registered by the library is defined under `calbench.calibrators`;
    every procedure twin under the pack that registers it; and no module of
    `calbench.calibrators` is a paper's procedure (``reference_*``, ``keras_*``)."""
    from calbench.calibrators.registry import CALIBRATORS, LIBRARY_CALIBRATORS
    from calbench.packs import paper_packs

    for name, (cls, _) in LIBRARY_CALIBRATORS.items():
        assert cls.__module__.startswith("calbench.calibrators."), (name, cls.__module__)
    twins = {name: pack.name for pack in paper_packs().values() for name in pack.calibrators()}
    assert twins and set(twins).isdisjoint(LIBRARY_CALIBRATORS)
    for name, pack in twins.items():
        assert CALIBRATORS[name][0].__module__.startswith(f"calbench.papers.{pack}."), name
    procedures = [
        p.name
        for p in (PACKAGE / "calibrators").glob("*.py")
        if p.name.startswith(("reference_", "keras_"))
    ]
    assert procedures == []


def test_each_paper_pack_holds_its_configs_numbers_and_page():
    """Each of calbench's packs has its ``pack.yaml``, its page (``README.md``) and its
    presets; a pack with published numbers names only its own presets in them."""
    from calbench.conf_files import load_yaml
    from calbench.packs import paper_packs
    from calbench.reproduce.published import published

    folders = sorted(
        p for p in (PACKAGE / "papers").iterdir() if p.is_dir() and p.name != "__pycache__"
    )
    # Every folder under papers/ is a pack, and each is found by looking (none is listed).
    assert folders and all((f / "pack.yaml").is_file() for f in folders)
    assert {f.name for f in folders} <= set(paper_packs())
    numbers = published(averages=True)
    for folder in folders:
        meta = load_yaml((folder / "pack.yaml").read_text())
        assert {"title", "paper", "citation", "reproduce_all"} <= set(meta), folder.name
        assert (folder / "README.md").is_file(), folder.name
        presets = {p.stem for p in (folder / "conf" / "experiment").glob("*.yaml")}
        assert presets and set(meta["reproduce_all"]) <= presets, folder.name
        own = numbers[numbers["pack"] == folder.name]
        assert set(own["preset"]) <= presets, folder.name


def test_the_results_room_stands_below_every_reader_and_the_runner():
    """`calbench.results` (the store, its checks, locks and reads) is written by the runner
    and read by statistics, tables, plots, claims, reproduction and the report: it imports
    none of them, and statistics import nothing from the runner."""
    readers = ("calbench.runner", "calbench.stats", "calbench.tables", "calbench.plots")
    readers += ("calbench.reproduce", "calbench.report", "calbench.cli", "calbench.papers")
    graph = import_graph()
    upward = [
        f"{m} imports {t}"
        for m, targets in graph.items()
        if m.startswith("calbench.results")
        for t in targets
        if t.startswith(readers)
    ]
    assert upward == []
    stats_on_runner = [
        f"{m} imports {t}"
        for m, targets in graph.items()
        if m.startswith("calbench.stats")
        for t in targets
        if t.startswith("calbench.runner")
    ]
    assert stats_on_runner == []


def test_readers_open_results_through_one_face():
    """Tables, plots, claims, reproduction and the report read rows through
    `calbench.results.experiment.Results` (read once), never `ResultStore.read` itself;
    a writer that opens the store (CalArena's importer) lives in its pack."""
    readers = ["tables", "plots", "reproduce", "report", "stats"]
    direct = [
        str(path.relative_to(PACKAGE))
        for room in readers
        for path in (PACKAGE / room).rglob("*.py")
        if "ResultStore(" in path.read_text()
    ]
    assert direct == []
