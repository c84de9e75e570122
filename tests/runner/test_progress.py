"""Progress a user can trust: a long cell reports its grid search as it goes, and a
sweep's estimate of the time left weighs cells by their cost, not as equals."""

import time

import numpy as np

from calbench.runner import progress
from calbench.runner.progress import (
    GridProgress,
    SweepEstimate,
    cell_cost,
    running,
    sweep_point,
    sweep_points,
)
from tests.runner.test_runner import plan


class FakeTimer:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_long_cell_reports_points_folds_and_seconds_a_fit(capsys):
    timer = FakeTimer()
    with running("exp | data | ms_odir", timer=timer):
        grid = GridProgress(points=36, folds=5, timer=timer)
        lines = []
        for point in range(36):
            for fold in range(5):
                timer.now += 2.0  # two seconds a fit
                lines.append(grid.fitted(point, fold))
    printed = [line for line in lines if line]
    # The first line once the cell has run REPORT_AFTER seconds, then one every REPORT_EVERY.
    assert printed[0] == (
        "[cell] exp | data | ms_odir | grid point 1/36, inner fold 5/5 | 2.0 s a fit | "
        "about 5:50 to go in this grid"
    )
    assert len(printed) == 1 + int((360 - 10) // progress.REPORT_EVERY)
    assert capsys.readouterr().out.splitlines() == printed


def test_no_time_left_is_promised_from_a_grid_points_first_fits(capsys):
    """A strongest-first grid's first fits are its fastest: one fit of 40 ms after 12 s of
    the cell's other work once printed "0.0 s a fit | about 0:00 to go"."""
    timer = FakeTimer()
    with running("exp | data | dir_l2", timer=timer):
        timer.now = 12.0
        grid = GridProgress(points=36, folds=5, timer=timer)
        timer.now += 0.04
        line = grid.fitted(0, 0)
    assert line.endswith("| 0.04 s a fit | time left unknown until a grid point has run")


def test_a_quick_cell_and_a_fit_outside_a_cell_print_nothing(capsys):
    timer = FakeTimer()
    outside = GridProgress(points=3, folds=2, timer=timer)
    timer.now = 100.0
    assert outside.fitted(0, 0) is None  # no running cell: a library call, not a sweep
    with running("quick", timer=timer):
        grid = GridProgress(points=3, folds=2, timer=timer)
        assert all(grid.fitted(p, f) is None for p in range(3) for f in range(2))
    assert capsys.readouterr().out == ""


def test_cell_cost_counts_grid_points_inner_folds_and_classes():
    ts = {"method": {"name": "ts", "grid": {}}, "protocol": {"inner_folds": 5}}
    odir = {
        "method": {"name": "ms_odir", "grid": {"reg_lambda": [1, 2, 3, 4, 5, 6], "reg_mu": [1, 2]}},
        "protocol": {"inner_folds": 5},
        "dataset": {"registry": {"classes": 100}},
    }
    assert cell_cost(ts) == 1.0
    assert cell_cost(odir) == (1 + 12 * 5) * 100
    unresolved = dict(odir, dataset={"registry": {"classes": "${n}"}})
    assert cell_cost(unresolved) == 1 + 12 * 5


def test_the_time_left_weighs_each_remaining_cell_by_its_method_and_cost():
    """TS done in 24 s; an MS-ODIR cell of 180 fits is not promised 24 s."""
    costs = [("ts", 1.0), ("ms_odir", 181.0), ("ts", 1.0), ("ms_odir", 181.0)]
    estimate = SweepEstimate(costs, jobs=1)
    assert estimate.to_go() is None
    estimate.finished(0, seconds=24.0, ran=True)
    assert estimate.untimed() == ["ms_odir"]
    assert np.isclose(estimate.to_go(), 24.0)  # MS-ODIR's cells: unknown, not guessed
    estimate.finished(1, seconds=181 * 2.0, ran=True)  # MS-ODIR's fits take 2 s each
    assert estimate.untimed() == []
    assert np.isclose(estimate.to_go(), 24.0 + 181 * 2.0)
    estimate.finished(2, seconds=0.01, ran=False)  # found stored: not a timing
    assert np.isclose(estimate.to_go(), 181 * 2.0)
    halved = SweepEstimate(costs, jobs=2)
    halved.finished(0, seconds=24.0, ran=True)
    halved.finished(1, seconds=181 * 2.0, ran=True)
    assert np.isclose(halved.to_go(), (24.0 + 181 * 2.0) / 2)


def test_the_line_says_what_is_unknown_instead_of_guessing():
    from hydra_plugins.calbench_launcher.calbench_launcher import _time_left

    assert _time_left(None, ["ts"]) == " | time left unknown until a cell has run"
    assert _time_left(90.0, []) == " | about 1:30 to go"
    assert _time_left(90.0, ["ms_odir"]) == (
        " | at least 1:30 to go, more for ms_odir: unknown until one of their cells has run"
    )


def test_after_a_quarter_of_a_sweep_the_estimate_is_within_a_factor_of_two():
    """A sweep as Hydra orders it (the method varies fastest): 3 methods x 12 data sets of
    2 to 100 classes, each cell's seconds its method's rate times its cost, +-30% noise.
    After the first quarter, the estimate lies within a factor of two of the time left."""
    rng = np.random.default_rng(0)
    rates = {"ts": 0.02, "dir_odir": 0.5, "knn_kl": 0.1}
    classes = rng.integers(2, 101, size=12)
    cells = [(m, float(k * (1 + 36 * 5 if m == "dir_odir" else 1))) for k in classes for m in rates]
    seconds = [rates[m] * cost * rng.uniform(0.7, 1.3) for m, cost in cells]
    estimate = SweepEstimate(cells, jobs=1)
    quarter = len(cells) // 4
    for i in range(quarter):
        estimate.finished(i, seconds[i], ran=True)
    assert estimate.untimed() == []
    truth = sum(seconds[quarter:])
    assert truth / 2 <= estimate.to_go() <= 2 * truth


def test_a_sweeps_lines_name_what_tells_its_cells_apart():
    """A sweep over classifiers printed three lines ``kull_uci_offline | keel_iris | uncal``
    with three numbers and nothing to say which was which."""
    jobs = [
        ["method=uncal", "dataset=keel_iris", "classifier=knn", "method.params.seed=15"],
        ["method=uncal", "dataset=keel_iris", "classifier=lda", "method.params.seed=15"],
        ["method=ts", "dataset=keel_wine", "classifier=knn", "method.params.seed=16"],
    ]
    assert sweep_points(jobs) == [
        "classifier=knn, method.params.seed=15",
        "classifier=lda, method.params.seed=15",
        "classifier=knn, method.params.seed=16",
    ]
    assert sweep_points([["method=ts", "dataset.path=a.npz"], ["method=vs"]]) == ["", ""]


def test_a_cells_label_shows_its_sweep_point():
    cell = plan("method=vs")
    assert cell.label == "default | synthetic_dirichlet | vs"
    with sweep_point("dataset.seed=1"):
        assert cell.label == "default | synthetic_dirichlet | vs | dataset.seed=1"


def test_a_long_cell_without_a_grid_says_it_is_still_running(monkeypatch, capsys):
    """A forest's depth search (no inner-CV grid to report) ran 158 s without a word."""
    timer, seen = FakeTimer(), ""
    with running("exp | data | forest", timer=timer):
        timer.now = 75.0  # 75 s in, none of its lines printed
        deadline = time.monotonic() + 10
        while "running" not in seen and time.monotonic() < deadline:
            time.sleep(0.1)
            seen += capsys.readouterr().out
    assert seen == "[cell] exp | data | forest | running, 1:15 so far\n"
    quick = FakeTimer()
    with running("exp | data | quick", timer=quick):
        quick.now = 30.0
        time.sleep(1.5)  # 30 s in: quiet for less than HEARTBEAT_EVERY, nothing printed
    assert capsys.readouterr().out == ""
