"""A researcher's own pack, found through ``CALBENCH_PAPER_PACKS`` with no edit anywhere
else, brings every kind of part: a calibrator, a data-set loader, a protocol, a
data-set view and a metric; its configs are on Hydra's search path and its run is stored and scored
like the library's."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy.special import log_softmax

from calbench.packs import PACKS_ENV
from calbench.results.store import ResultStore

PACK = '''
import numpy as np

from calbench.calibrators import Calibrator
from calbench.data import Dataset
from calbench.metrics import MetricSpec
from calbench.runner.protocols import Fold, Member
from calbench.simplex import softmax


class HalfTemperature(Calibrator):
    """Divides the logits by 2, whatever the data (a fixed map: nothing to learn).

    Parameters
    ----------
    divisor : float
        What the logits are divided by.
    """

    def __init__(self, divisor=2.0):
        self.divisor = divisor

    def _fit(self, logits, y):
        self.seen_ = len(y)

    def _predict_proba(self, logits):
        return softmax(logits / self.divisor)


def load_squares(n=60, k=3):
    """Logits i mod k on the diagonal, labels i mod k: a set any reader can recompute."""
    i = np.arange(n)
    logits = np.zeros((n, k))
    logits[i, i % k] = 1.0 + (i % 5)
    y = i % k
    return Dataset("squares", logits[: n // 2], y[: n // 2], logits[n // 2 :], y[n // 2 :])


def odd_even(dataset, seed=0):
    """Fits on the calibration part's even rows, evaluates on the test part's odd rows."""
    member = Member(dataset.logits_cal[::2], dataset.y_cal[::2], dataset.logits_test[1::2])
    yield Fold(0, [member], dataset.y_test[1::2])


def half_error(probs, y):
    """The share of rows whose label's probability is under 0.9."""
    return float(np.mean(probs[np.arange(len(y)), y] < 0.9))


def doubled(dataset, value):
    """The logits times ``value``."""
    import dataclasses

    return dataclasses.replace(
        dataset, logits_cal=dataset.logits_cal * value, logits_test=dataset.logits_test * value
    )


CALIBRATORS = {"half_temperature": (HalfTemperature, {})}
LOADERS = {"squares": load_squares}
PROTOCOLS = {"odd_even": (odd_even, Dataset, ())}
VIEWS = {"scaled": doubled}
METRICS = {"half_error": MetricSpec(half_error, range=(0.0, 1.0))}
'''

CONFIGS = {
    "dataset/squares.yaml": "name: squares\nloader: squares\nn: 60\nscaled: 3.0\n",
    "method/half_temperature.yaml": "name: half_temperature\ncalibrator: half_temperature\n",
    "protocol/odd_even.yaml": "name: odd_even\ninner_folds: 2\naverage_inner_models: false\n",
    "metrics/toy.yaml": "log_loss: {}\nhalf_error: {}\n",
}


@pytest.fixture
def toy_pack(tmp_path, monkeypatch):
    pack = tmp_path / "packs" / "toypack"
    (pack / "conf").mkdir(parents=True)
    (pack / "pack.yaml").write_text("title: A toy pack\npaper: Toy\nreproduce_all: []\n")
    (pack / "__init__.py").write_text(textwrap.dedent(PACK))
    for relative, text in CONFIGS.items():
        (pack / "conf" / relative).parent.mkdir(exist_ok=True)
        (pack / "conf" / relative).write_text(text)
    monkeypatch.setenv(PACKS_ENV, str(tmp_path / "packs"))
    return pack


def test_a_pack_brings_a_calibrator_a_loader_a_protocol_a_view_and_a_metric(toy_pack, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "calbench.cli", "run", "dataset=squares", "protocol=odd_even"]
        + ["method=half_temperature", "metrics=toy", f"results_dir={tmp_path / 'results'}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = ResultStore(tmp_path / "results").read()
    assert set(rows["method"]) == {"half_temperature"}
    value = rows.loc[rows["metric"] == "log_loss", "value"].item()
    # By hand: the test half's odd rows, logits scaled by 3 (the view), then halved.
    i = np.arange(30, 60)[1::2]
    logits = np.zeros((len(i), 3))
    logits[np.arange(len(i)), i % 3] = 3.0 * (1.0 + (i % 5)) / 2.0
    expected = -log_softmax(logits, axis=1)[np.arange(len(i)), i % 3].mean()
    assert value == pytest.approx(expected, rel=1e-12)
    # The pack's metric, by hand: the label's probability under 0.9.
    probs = np.exp(log_softmax(logits, axis=1))[np.arange(len(i)), i % 3]
    half = rows.loc[rows["metric"] == "half_error", "value"].item()
    assert half == np.mean(probs < 0.9) and 0 < half < 1


def test_a_pack_may_not_take_a_library_name(toy_pack):
    from calbench.errors import CalbenchError
    from calbench.runner.protocols import PROTOCOLS

    init = toy_pack / "__init__.py"
    init.write_text(init.read_text().replace('"odd_even": (', '"nested": ('))
    with pytest.raises(CalbenchError, match="registers protocol 'nested', which the library"):
        "anything" in PROTOCOLS  # noqa: B015 (the lookup is what is tested)
