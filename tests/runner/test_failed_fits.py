"""A fit that failed is never stored as the method's result: scores no float64 softmax can
hold are refused at load, a fit whose numbers overflow is refused with one line, and a fit
that stopped before converging is marked in its rows (``fit_unconverged``) and in every
table (§) and leaderboard."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from calbench.calibrators import Calibrator, make_calibrator
from calbench.errors import CalbenchError
from calbench.results.store import ResultStore
from calbench.runner.job import run_job
from calbench.validation import check_scores


def calbench(*args):
    return subprocess.run(
        [sys.executable, "-m", "calbench.cli", *args], capture_output=True, text=True, timeout=600
    )


def _scores(scale=1.0, n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    z = rng.normal(size=(n, 3))
    z[np.arange(n), y] += 1.5
    return z * scale, y


def test_a_row_no_float64_softmax_holds_is_refused_at_load(tmp_path):
    z, y = _scores()
    z[7] = [1e308, -1e308, 0.0]  # finite entries; their difference is not
    with pytest.raises(CalbenchError, match=r"row 7 spans -1e\+308 to 1e\+308"):
        check_scores(z, "logits", "x.npz")
    np.savez(tmp_path / "huge.npz", logits=z, y=y)
    out = calbench(
        "run", "dataset=npz", f"dataset.path={tmp_path}/huge.npz", f"results_dir={tmp_path}"
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "huge.npz: logits row" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("store/*.csv"))
    # A wide but representable row is data like any other.
    z[7] = [1e300, -1e300, 0.0]
    np.testing.assert_array_equal(check_scores(z, "logits", "x"), z)


def test_an_overflowing_fit_is_refused_not_passed_off_as_the_identity():
    """Vector scaling on scores scaled by 1e30: Newton's Hessian overflows (its float32
    product reaches 1e60); before, the fit stopped at its start, the identity, and the
    uncalibrated log-loss was stored as vector scaling's."""
    z, y = _scores(scale=1e30)
    with pytest.raises(CalbenchError, match="Newton's method failed: its step is not finite"):
        make_calibrator("vs").fit(z, y)
    # Temperature scaling absorbs the scale: a real fit, T about 1e30.
    ts = make_calibrator("ts").fit(z, y)
    assert 1e29 < ts.temperature_ < 1e31


class _NaNFit(Calibrator):
    """A calibrator whose optimiser returned NaN."""

    def _fit(self, logits, y):
        self.scale_ = np.array([1.0, np.nan])
        self.loss_ = float("nan")

    def _predict_proba(self, logits):
        return np.full(logits.shape, 1 / logits.shape[1])


def test_a_fit_that_learned_nan_is_refused():
    z, y = _scores()
    with pytest.raises(CalbenchError, match=r"_NaNFit.fit failed: its objective is nan"):
        _NaNFit().fit(z, y)


def test_an_unconverged_fit_is_marked_in_its_rows_tables_and_leaderboard(tmp_path, capsys):
    from calbench.tables.leaderboard import display_frame, leaderboard
    from calbench.tables.write import write_tables
    from tests.runner.test_runner import plan

    small = ["dataset.n_cal=600", "dataset.n_test=900", f"results_dir={tmp_path}"]
    with pytest.warns(ConvergenceWarning):
        for method in ("bcts", "vs"):
            run_job(plan(*small, f"method={method}", "+method.params.max_iter=1"))
    assert "tables mark this cell with §" in capsys.readouterr().out
    run_job(plan(*small, "method=ts"))
    rows = ResultStore(tmp_path).read()
    short = rows[rows["metric"] == "fit_unconverged"]
    # One Newton step (vs) or one L-BFGS step (bcts) stops short of either optimum.
    assert set(short["method"]) == {"bcts", "vs"} and (short["value"] == 1).all()
    write_tables(tmp_path, echo=False)
    table = (tmp_path / "tables" / "default_log_loss.md").read_text()
    header = table.splitlines()[2].split("|")
    values = table.splitlines()[4].split("|")
    marked = dict(zip([h.strip() for h in header], [v.strip() for v in values], strict=True))
    assert "§" in marked["bcts"] and "§" in marked["vs"] and "§" not in marked["ts"]
    assert "stopped before converging" in table.splitlines()[0]
    csv = (tmp_path / "tables" / "default_log_loss.csv").read_text()
    assert "fit_unconverged" in csv.splitlines()[0]
    board = leaderboard(tmp_path, "default", "log_loss")
    shown = display_frame(board)["§ unconverged (tasks)"]
    assert shown.to_dict() == {"bcts": "1", "vs": "1", "ts": "0"}
