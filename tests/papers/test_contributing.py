"""The contributor's guide, run: a calibrator is one class plus one YAML file, and a paper is
one folder (a pack) that ``calbench reproduce`` picks up with no edit anywhere else.

The toy paper's one published number is computed here independently (scipy's softmax,
scikit-learn's log-loss) on the data calbench's run uses, so an "equal" row is the pack's
calibrator, config, published CSV and Hydra search path all found and used as written.
"""

import inspect
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.metrics import log_loss

from calbench.data import load_dataset
from tests.runner.test_widen_edges import FixedTemperature

TEMPERATURE = 1.7

#: The toy pack's Python: one calibrator class (the one grid widening is tested with) and
#: its registration.
PACK_INIT = (
    '"""A toy paper: softmax(z / T) at a fixed temperature."""\n'
    "from calbench.calibrators import Calibrator\n"
    "from calbench.simplex import softmax\n\n\n"
    + inspect.getsource(FixedTemperature)
    + '\n\nCALIBRATORS = {"toy_fixed_temperature": (FixedTemperature, {})}\n'
)


def write_toy_pack(root, value: str):
    pack = root / "toy2026"
    (pack / "conf" / "method").mkdir(parents=True)
    (pack / "conf" / "experiment").mkdir()
    (pack / "published").mkdir()
    (pack / "pack.yaml").write_text("title: Toy 2026\npaper: Toy\nreproduce_all: [toy_tables]\n")
    (pack / "__init__.py").write_text(PACK_INIT)
    (pack / "conf" / "method" / "toy_t17.yaml").write_text(
        f"# The toy paper's method: a fixed temperature of {TEMPERATURE}.\n"
        f"name: toy_t17\ncalibrator: toy_fixed_temperature\nparams:\n"
        f"  temperature: {TEMPERATURE}\n"
    )
    (pack / "conf" / "experiment" / "toy_tables.yaml").write_text(
        textwrap.dedent(
            """\
            # @package _global_
            # The toy paper's Table 1.
            experiment: toy_tables
            hydra:
              mode: MULTIRUN
              sweeper:
                params:
                  dataset: synthetic_dirichlet
                  method: uncal,toy_t17
            """
        )
    )
    (pack / "published" / "toy2026_table1.csv").write_text(
        "paper,table,preset,dataset,column,method,metric,scale,value,rank\n"
        f"Toy,Table 1,toy_tables,synthetic_dirichlet,T=1.7,toy_t17,log_loss,1,{value},\n"
    )
    (pack / "notes.yaml").write_text("[]\n")
    return pack


@pytest.mark.slow  # 8 s; tests/papers/test_toy_pack.py runs a whole pack in the quick suite
def test_a_paper_pack_in_its_own_folder_is_reproduced_without_edits(tmp_path):
    data = load_dataset("synthetic_dirichlet", seed=0)
    expected = log_loss(data.y_test, softmax(data.logits_test / TEMPERATURE, axis=1))
    write_toy_pack(tmp_path / "packs", f"{expected:.4f}")
    env = {**os.environ, "CALBENCH_PAPER_PACKS": str(tmp_path / "packs")}
    command = [sys.executable, "-m", "calbench.cli", "reproduce", "toy_tables"]
    command += [f"--data-dir={tmp_path / 'data'}", f"--results-dir={tmp_path / 'results'}"]
    run = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    report = (tmp_path / "results" / "reproduction" / "toy_tables.csv").read_text()
    row = [line for line in report.splitlines() if ",toy_t17," in line]
    assert len(row) == 1 and ",equal," in row[0], report

    # Without the variable the pack is unknown: nothing of it leaked into calbench.
    del env["CALBENCH_PAPER_PACKS"]
    run = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode != 0 and "toy_tables" in run.stderr


def test_a_pack_calibrator_is_made_by_name_in_python(tmp_path, monkeypatch):
    from calbench.calibrators import make_calibrator

    write_toy_pack(tmp_path, "0")
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(tmp_path))
    data = load_dataset("synthetic_dirichlet", seed=0)
    calibrator = make_calibrator("toy_t17").fit(data.logits_cal, data.y_cal)
    np.testing.assert_allclose(
        calibrator.predict_proba(data.logits_test),
        softmax(data.logits_test / TEMPERATURE, axis=1),
        rtol=1e-12,
    )


def test_a_pack_may_not_take_a_library_name(tmp_path, monkeypatch):
    from calbench.conf_files import group_files
    from calbench.errors import CalbenchError

    pack = write_toy_pack(tmp_path, "0")
    (pack / "conf" / "method" / "ts.yaml").write_text("name: ts\ncalibrator: ts\n")
    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(tmp_path))
    with pytest.raises(CalbenchError, match="method=ts is defined twice.*toy2026"):
        group_files("method")


def test_a_missing_pack_folder_is_named(tmp_path, monkeypatch):
    from calbench.errors import CalbenchError
    from calbench.packs import paper_packs

    monkeypatch.setenv("CALBENCH_PAPER_PACKS", str(tmp_path / "nowhere"))
    with pytest.raises(CalbenchError, match="CALBENCH_PAPER_PACKS names .*nowhere"):
        paper_packs()
