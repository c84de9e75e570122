"""One record per metric (issue 69 item 3): every metric's record holds its direction and
range, no second registry of per-sample or resampled forms remains, and the metrics import
nothing from the rooms that read them."""

import ast
from pathlib import Path

import pytest

from calbench.metrics import METRICS, MetricSpec

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_has_one_record_with_a_direction_and_a_range(name):
    spec = METRICS[name]
    assert isinstance(spec, MetricSpec)
    assert spec.direction in ("lower", "higher", "diagnostic")
    low, high = spec.range
    assert low < high
    assert spec.higher_is_better == (spec.direction == "higher")
    assert spec.diagnostic == (spec.direction == "diagnostic")


def _modules(folder):
    return sorted((ROOT / folder).rglob("*.py"))


def test_no_second_registry_of_metric_forms():
    held = []
    for path in _modules("calbench"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            held += [
                f"{path.relative_to(ROOT)}: {t.id}"
                for t in targets
                if isinstance(t, ast.Name) and t.id in {"PER_SAMPLE", "VECTORISED"}
            ]
    assert not held


def test_metrics_import_nothing_from_stats_runner_or_tables():
    forbidden = ("calbench.stats", "calbench.runner", "calbench.tables")
    found = []
    for path in _modules("calbench/metrics"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            found += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in names
                if any(n == f or n.startswith(f + ".") for f in forbidden)
            ]
    assert not found
