"""What a cell stores of its fitted calibrator (`Calibrator.learned`, the ``fitted``
column) and how ``calbench tables --fitted`` and the report show it."""

import json
import subprocess
import sys

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from calbench.calibrators import make_calibrator
from calbench.results.store import ResultStore
from calbench.tables.fitted import fitted_text, write_fitted


def _temperature_by_scipy(z, y) -> float:
    """Temperature scaling written out: the T minimising the mean log-loss of z / T."""

    def nll(log_t):
        return -log_softmax(z / np.exp(log_t), axis=1)[np.arange(len(y)), y].mean()

    return float(np.exp(minimize_scalar(nll, bounds=(-3, 3), method="bounded").x))


def test_learned_keeps_the_small_parameters_and_leaves_the_large(rng):
    z = rng.normal(size=(400, 5)) * 3
    y = rng.integers(0, 5, 400)
    ts = make_calibrator("ts").fit(z, y).learned()
    assert ts["temperature_"] == make_calibrator("ts").fit(z, y).temperature_
    assert {"log_temperature_", "loss_", "n_iter_"} <= set(ts) and "n_classes_" not in ts
    vs = make_calibrator("vs").fit(z, y).learned()
    assert len(vs["coef_"]) == 5 and len(vs["intercept_"]) == 5
    wide = rng.normal(size=(600, 9)) * 3
    ms = make_calibrator("ms_odir").fit(wide, rng.integers(0, 9, 600)).learned()
    assert "coef_" not in ms  # 81 numbers: over the limit
    assert len(ms["intercept_"]) == 9 and ms["reg_lambda_"] > 0
    json.dumps(ms)  # plain numbers only


def test_a_cell_stores_its_temperature_and_tables_show_it(tmp_path):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 2000)
    z = rng.normal(size=(2000, 4))
    z[np.arange(2000), y] += 1.5
    z *= 3  # over-confident: T well above 1
    np.savez(
        tmp_path / "net.npz",
        logits_cal=z[:1000],
        y_cal=y[:1000],
        logits_test=z[1000:],
        y_test=y[1000:],
    )
    run = [sys.executable, "-m", "calbench.cli"]
    out = subprocess.run(
        [*run, "run", "dataset=npz", f"dataset.path={tmp_path}/net.npz", f"results_dir={tmp_path}"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    rows = ResultStore(tmp_path).read()
    stored = json.loads(rows["fitted"].iat[0])
    assert abs(stored["temperature_"] - _temperature_by_scipy(z[:1000], y[:1000])) < 1e-4
    assert stored["temperature_"] > 1.5
    table = write_fitted(tmp_path, "default").read_text()  # `calbench tables --fitted`
    assert f"temperature_ = {stored['temperature_']:.4g}" in table


def test_cells_stored_before_the_column_read_as_nothing_fitted(tmp_path):
    store = ResultStore(tmp_path)
    text = (
        "experiment,dataset,method,criterion,loss,shift,protocol,fold,metric,value,"
        "fit_seconds,params,config_hash,seed,calbench_version\n"
        "e,d,ts,nll,zero_one,none,holdout,0,log_loss,0.5,0.1,{},abc,0,0.1.0\n"
    )
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "abc.csv").write_text(text)
    rows = store.read()
    assert rows["fitted"].tolist() == ["{}"] and fitted_text(rows["fitted"].iat[0]) == "-"


def test_fitted_text_prints_vectors_by_their_first_entries():
    text = fitted_text(
        {"coef_": [[1.0, 0.5], [0.25, 2.0], [3.0, 4.0]], "n_iter_": 7, "t_": 1.23456}
    )
    assert text == "coef_ = [1, 0.5, 0.25, 2, ... (6)]; n_iter_ = 7; t_ = 1.235"
    assert fitted_text([{"a_": 1.0}, {"a_": 2.0}]) == "a_ = 1 | a_ = 2"
