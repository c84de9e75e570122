"""The ``module:Class`` route (a user's own calibrator, ``method.calibrator=module:Class``):
listed by ``calbench list methods`` as any method is, made by name, and held to the shared
contract (`tests.calibrators.own_calibrator`, run by the contract tests over every
registered calibrator)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

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


def test_a_packs_own_module_imports_wherever_calbench_runs(tmp_path, monkeypatch):
    """Her class beside its YAML in the pack: `list methods` failed outside its folder."""
    pack = tmp_path / "mine"
    (pack / "conf" / "method").mkdir(parents=True)
    (pack / "pack.yaml").write_text("title: Mine\n")
    (pack / "mine_cal_module.py").write_text(
        "from tests.calibrators.own_calibrator import Shrink\n\n\nclass Mine(Shrink):\n    pass\n"
    )
    (pack / "conf" / "method" / "mine.yaml").write_text(
        "name: mine\ncalibrator: mine_cal_module:Mine\n"
    )
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(pack))
    monkeypatch.chdir(tmp_path)  # not the pack's folder
    assert type(make_calibrator("mine")).__name__ == "Mine"


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: bad\ncalibrater: ts\n", r"bad.yaml: unknown key 'calibrater' \(did you mean"),
        ("name: other\ncalibrator: ts\n", r"bad.yaml: name: other is not the file's name"),
        ("name: bad\n", r"bad.yaml: no calibrator: name a registered calibrator"),
    ],
)
def test_a_packs_bad_method_file_is_named(tmp_path, monkeypatch, text, message):
    from calbench.calibrators.methods import method_configs
    from calbench.errors import CalbenchError

    pack = tmp_path / "badpack"
    (pack / "conf" / "method").mkdir(parents=True)
    (pack / "pack.yaml").write_text("title: Bad\n")
    (pack / "conf" / "method" / "bad.yaml").write_text(text)
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(pack))
    with pytest.raises(CalbenchError, match=message):
        method_configs()


def test_a_packs_folder_without_pack_yaml_is_named(tmp_path, monkeypatch):
    from calbench.errors import CalbenchError
    from calbench.packs import paper_packs

    (tmp_path / "conf" / "method").mkdir(parents=True)
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(tmp_path))
    with pytest.raises(CalbenchError, match="which holds no pack.yaml, nor does any folder"):
        paper_packs()


def test_a_packs_method_naming_no_calibrator_is_named_by_its_file(tmp_path, monkeypatch):
    """`calbench list methods` crashed with KeyError: 'vss'."""
    from calbench.errors import CalbenchError

    pack = tmp_path / "typo"
    (pack / "conf" / "method").mkdir(parents=True)
    (pack / "pack.yaml").write_text("title: Typo\n")
    (pack / "conf" / "method" / "typo.yaml").write_text("name: typo\ncalibrator: vss\n")
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(pack))
    with pytest.raises(
        CalbenchError, match=r"typo.yaml: calibrator: vss names no registered .*'vs'"
    ):
        catalogue("methods")
