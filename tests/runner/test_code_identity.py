"""A researcher's own calibrator, edited between two runs of the same command, is computed
again (its cell's identity holds the SHA-256 of her code), and the tables show the edited
code's numbers only; calbench's own methods keep their hashes."""

import subprocess
import sys

import numpy as np
import pytest

from calbench.errors import CalbenchError
from calbench.results.store import ResultStore
from calbench.runner.code import code_identity

CALIBRATOR = '''
import numpy as np
from calbench.calibrators import Calibrator
from calbench.simplex import softmax
from {helper} import WEIGHT


class Shrink(Calibrator):
    """Mixes the model's probabilities with the calibration labels' frequencies."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def _fit(self, logits, y):
        self.prior_ = np.bincount(y, minlength=logits.shape[1]) / len(y)

    def _predict_proba(self, logits):
        return WEIGHT * softmax(logits) + (1 - WEIGHT) * self.prior_
'''


def calbench(folder, *args):
    return subprocess.run(
        [sys.executable, "-m", "calbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=folder,
    )


def _shrink_log_loss(folder) -> dict:
    rows = ResultStore(folder / "results").read()
    rows = rows[(rows["method"] == "shrink") & (rows["metric"] == "log_loss")]
    return dict(zip(rows["config_hash"], rows["value"], strict=True))


def test_an_edited_calibrator_or_a_module_it_imports_is_computed_again(tmp_path):
    (tmp_path / "weights.py").write_text("WEIGHT = 0.9\n")
    (tmp_path / "shrink.py").write_text(CALIBRATOR.format(helper="weights"))
    args = ["run", "method=uncal", "method.name=shrink", "method.calibrator=shrink:Shrink"]
    assert calbench(tmp_path, *args).returncode == 0
    first = _shrink_log_loss(tmp_path)
    again = calbench(tmp_path, *args)
    assert "already in the store" in again.stdout  # unchanged code: served from the store
    (tmp_path / "weights.py").write_text("WEIGHT = 0.5\n")  # the module it imports
    edited = calbench(tmp_path, *args)
    assert edited.returncode == 0 and "already in the store" not in edited.stdout
    second = _shrink_log_loss(tmp_path)
    assert len(first) == len(second) == 1 and second.keys() != first.keys()
    # Its own closed form: the mixture's log-loss moves with the weight (not 1e-3 apart).
    assert abs(next(iter(second.values())) - next(iter(first.values()))) > 1e-3
    config = ResultStore(tmp_path / "results").config(next(iter(second)))
    assert [m["module"] for m in config["code"]["modules"]] == ["shrink", "weights"]
    assert {len(m["sha256"]) for m in config["code"]["modules"]} == {64}
    # The calibrator's own module edited (a comment is code too: the file is the identity).
    with open(tmp_path / "shrink.py", "a") as f:
        f.write("# tried a larger prior\n")
    assert "already in the store" not in calbench(tmp_path, *args).stdout
    assert len(_shrink_log_loss(tmp_path)) == 1  # tables show the newest code's cell only


def test_tables_show_no_cell_of_her_code_before_its_edit(tmp_path):
    """Edited, then rerun on one of her two models only: the other model's cell of the old
    code stood in the same column, unmarked (a newcomer's audit, 2026-11-29). It is left
    out, and said to be."""
    assert calbench(tmp_path, "data", "example").returncode == 0
    (tmp_path / "weights.py").write_text("WEIGHT = 0.9\n")
    (tmp_path / "shrink.py").write_text(CALIBRATOR.format(helper="weights"))
    own = ["run", "method=uncal", "method.name=shrink", "method.calibrator=shrink:Shrink"]
    assert calbench(tmp_path, *own, "dataset=npz", "dataset.path=model_b.npz").returncode == 0
    (tmp_path / "weights.py").write_text("WEIGHT = 0.5\n")
    assert calbench(tmp_path, *own, "dataset=npz", "dataset.path=model_a.npz").returncode == 0
    assert len(_shrink_log_loss(tmp_path)) == 1  # model_a's, of the edited code
    tables = calbench(tmp_path, "tables")
    assert "1 stored cell(s) are superseded by newer ones" in tables.stdout, tables.stdout


def test_calbenchs_own_methods_and_installed_packages_are_not_the_users_code():
    from calbench.calibrators import make_calibrator

    for name in ("ts", "dir_odir", "knn_kl"):
        assert code_identity(make_calibrator(name)) is None


def test_a_composition_counts_its_users_step(tmp_path, monkeypatch):
    (tmp_path / "weights_c.py").write_text("WEIGHT = 0.7\n")
    (tmp_path / "shrink_c.py").write_text(CALIBRATOR.format(helper="weights_c"))
    monkeypatch.syspath_prepend(str(tmp_path))
    from calbench.calibrators.registry import registered_calibrator

    composed = registered_calibrator("compose", first="ts", second="shrink_c:Shrink")
    identity = code_identity(composed)
    assert [m["module"] for m in identity["modules"]] == ["shrink_c", "weights_c"]
    # Edited after this process imported it: the old code would run under the new file's
    # name, so it is refused with the way out.
    (tmp_path / "weights_c.py").write_text("WEIGHT = 0.1\n")
    with pytest.raises(CalbenchError, match=r"weights_c.py changed after this Python process"):
        code_identity(composed)
    np.testing.assert_equal(sys.modules["weights_c"].WEIGHT, 0.7)


def test_the_docs_say_what_a_cells_identity_holds():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "guide" / "results.md").read_text()
    section = text.split("## What a cell's identity holds")[1]
    for holds in ("configuration", "SHA-256 of their bytes", "your code", "`code`"):
        assert holds in section
