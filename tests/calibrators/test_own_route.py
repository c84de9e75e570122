"""The ``module:Class`` route (a user's own calibrator, ``method.calibrator=module:Class``):
listed by ``calbench list methods`` as any method is, made by name, and held to the shared
contract (`tests.calibrators.own_calibrator`, run by the contract tests over every
registered calibrator)."""

import json
import os
import subprocess
import sys

import numpy as np

from calbench.calibrators import make_calibrator
from calbench.calibrators.methods import method
from calbench.listing import catalogue
from tests.calibrators.own_calibrator import OWN_CALIBRATOR, Shrink

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _own_pack(root):
    """A user's pack whose one method names the own calibrator as ``module:Class``."""
    pack = root / "own2026"
    (pack / "conf" / "method").mkdir(parents=True)
    (pack / "pack.yaml").write_text("title: Own 2026\npaper: Own\nreproduce_all: []\n")
    (pack / "conf" / "method" / "own_shrink.yaml").write_text(
        "# A user's own calibrator by its import path: the model mixed with the label prior.\n"
        f"name: own_shrink\ncalibrator: {OWN_CALIBRATOR}\nparams:\n  prior: uniform\n"
        "grid:\n  weight: [0.8, 0.9]\n"
    )
    return root


def test_a_method_naming_module_class_is_listed(tmp_path, monkeypatch):
    """It crashed ``calbench list methods`` (no registered class to read the family from)."""
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(_own_pack(tmp_path)))
    rows = {row["name"]: row for row in catalogue("methods")}
    own = rows["own_shrink"]
    assert own["family"] == "own"
    assert own["calibrator"] == OWN_CALIBRATOR
    assert own["input"] == "logits" and own["searched"] == "weight"
    assert rows["ts"]["family"] == "scaling" and rows["ts_dec"]["family"] == "composition"
    assert all(row["family"] != "calarena" for row in rows.values())
    calibrator, grid = method("own_shrink")
    assert isinstance(calibrator, Shrink) and calibrator.prior == "uniform"
    assert grid == {"weight": [0.8, 0.9]}


def test_calbench_list_methods_shows_the_own_route(tmp_path):
    env = {
        **os.environ,
        "CALBENCH_PAPER_PACKS": str(_own_pack(tmp_path)),
        "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "calbench.cli", "list", "methods", "--json"]
    run = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    rows = {row["name"]: row for row in json.loads(run.stdout)}
    assert rows["own_shrink"]["family"] == "own"


def test_the_own_calibrator_is_made_and_fitted_by_name():
    z = np.array([[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
    shrink = make_calibrator(OWN_CALIBRATOR, weight=0.5).fit(z, np.array([0, 1, 2]))
    p = shrink.predict_proba(z)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert shrink.certainty() == "never"


def test_method_takes_module_class_as_make_calibrator_does():
    """own-scores.md: "a name means in Python what it means on the command line";
    ``method("my_calibrator:Shrink")`` said "Unknown method"."""
    calibrator, grid = method(OWN_CALIBRATOR, weight=0.8)
    assert isinstance(calibrator, Shrink) and calibrator.weight == 0.8 and grid == {}
