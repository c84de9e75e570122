"""Progress a user can trust: a long cell's own line, and a sweep's estimate of what is left.

A cell that searches a grid by inner CV reports itself once it has run `REPORT_AFTER`
seconds, then every `REPORT_EVERY` seconds: grid points and inner folds done, seconds a
fit, and the time its grid has left (`GridProgress`). A sweep weighs each cell by what its
config says it will cost (`cell_cost`: grid points x inner folds, times the classes) and
learns each method's seconds per unit of that cost from the cells it has finished
(`SweepEstimate`), so a sweep of TS and MS-ODIR cells does not promise the MS-ODIR grid
the time TS took.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time

#: Seconds a cell runs before it reports its progress, and between its lines.
REPORT_AFTER = 10.0
REPORT_EVERY = 30.0

_CELL = contextvars.ContextVar("calbench_cell", default=None)


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class _RunningCell:
    def __init__(self, label: str, timer):
        self.label, self.timer = label, timer
        self.started, self.last = timer(), None

    def due(self) -> bool:
        """Whether a line is due: `REPORT_AFTER` into the cell, then every `REPORT_EVERY`."""
        now = self.timer()
        if now - self.started < REPORT_AFTER:
            return False
        if self.last is not None and now - self.last < REPORT_EVERY:
            return False
        self.last = now
        return True


#: The overrides that tell this cell from the others of its sweep (`sweep_point`).
_POINT = contextvars.ContextVar("calbench_sweep_point", default="")

#: Override keys a cell's label names already (`calbench.runner.plan.CellPlan.label`).
LABELLED_KEYS = (
    "experiment",
    "dataset",
    "method",
    "dataset.path",
    "dataset.name",
    "dataset.task",
    "method.name",
)


def sweep_points(job_overrides) -> list[str]:
    """Each job's overrides whose key takes more than one value across the sweep, except
    those its label names already (`LABELLED_KEYS`): ``classifier=knn``,
    ``method.params.seed=15``. Without them a sweep over classifiers or seeds printed
    lines that differ only in their numbers."""
    parsed = [dict(o.lstrip("+~").split("=", 1) for o in job if "=" in o) for job in job_overrides]
    varying = [
        k
        for k in dict.fromkeys(k for job in parsed for k in job)
        if len({job.get(k) for job in parsed}) > 1 and k not in LABELLED_KEYS
    ]
    return [", ".join(f"{k}={job[k]}" for k in varying if k in job) for job in parsed]


@contextlib.contextmanager
def sweep_point(words: str):
    """The cell now running is the sweep's point ``words`` (`sweep_points`), which its
    label shows."""
    token = _POINT.set(words)
    try:
        yield
    finally:
        _POINT.reset(token)


def current_sweep_point() -> str:
    return _POINT.get()


#: Seconds a cell with no grid to report runs before it says it is still running, and
#: between those lines (a forest's depth search ran 158 s without a word).
HEARTBEAT_EVERY = 60.0


@contextlib.contextmanager
def running(label: str, timer=time.perf_counter):
    """The cell now running in this process, named in its progress lines, which are timed
    from its start (its grid searches, one per outer fold, report into it); where none has
    printed for `HEARTBEAT_EVERY` seconds, a line says it is still running."""
    cell = _RunningCell(label, timer)
    token = _CELL.set(cell)
    stop = threading.Event()
    # (the stream of the cell's start: a calibrator may swap sys.stdout while it fits)
    beat = threading.Thread(target=_heartbeat, args=(cell, stop, sys.stdout), daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()  # no line after the cell's own last
        _CELL.reset(token)


def _heartbeat(cell: _RunningCell, stop: threading.Event, stream) -> None:
    while not stop.wait(1.0):
        now = cell.timer()
        quiet = now - (cell.last if cell.last is not None else cell.started)
        if quiet >= HEARTBEAT_EVERY:
            cell.last = now
            line = f"[cell] {cell.label} | running, {clock(now - cell.started)} so far"
            print(line, file=stream, flush=True)


class GridProgress:
    """An inner-CV grid search's fits: ``fitted(point, fold)`` after each; prints a line
    when the running cell has taken long enough (see the module docstring)."""

    def __init__(self, points: int, folds: int, timer=time.perf_counter):
        self.points, self.folds, self.timer = points, folds, timer
        self.total, self.done = points * folds, 0
        self.started = timer()

    def fitted(self, point: int, fold: int) -> str | None:
        """Count one fit; returns the line printed, if one was."""
        self.done += 1
        cell = _CELL.get()
        if cell is None or not cell.due():
            return None
        per_fit = (self.timer() - self.started) / self.done
        # A grid walked from the strongest penalty down fits its first points fastest (the
        # ODIR grids: milliseconds, then seconds): one point's fits promised "about 0:00"
        # to a cell that ran 80 s more. So no estimate before a whole point has run.
        left = (
            f"about {clock(per_fit * (self.total - self.done))} to go in this grid"
            if self.done >= self.folds
            else "time left unknown until a grid point has run"
        )
        line = (
            f"[cell] {cell.label} | grid point {point + 1}/{self.points}, inner fold "
            f"{fold + 1}/{self.folds} | {_seconds(per_fit)} a fit | {left}"
        )
        print(line, flush=True)
        return line


def _seconds(value: float) -> str:
    """``0.043 s`` (not ``0.0 s``) below a second, ``2.0 s`` below ten, ``14 s`` above."""
    if value < 1:
        return f"{value:.2g} s"
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def cell_cost(config: dict) -> float:
    """What a cell's config (resolved or not) says of its cost, in fits times classes: the
    grid points times the inner folds (plus the final fit) where it searches a grid, times
    the classes its data set's registry names (1 where it names none, or names them by an
    interpolation)."""
    from sklearn.model_selection import ParameterGrid

    method, protocol = config.get("method") or {}, config.get("protocol") or {}
    points = len(ParameterGrid(method.get("grid") or {})) or 1
    folds = protocol.get("inner_folds")
    fits = 1 + (points * (folds if isinstance(folds, int) else 1) if points > 1 else 0)
    classes = ((config.get("dataset") or {}).get("registry") or {}).get("classes")
    return float(fits * (classes if isinstance(classes, int) else 1))


class SweepEstimate:
    """The time a sweep has left: each remaining cell's `cell_cost` at its method's seconds
    per unit of cost so far, shared over the jobs running at once. A method none of whose
    cells has run has no rate: its cells are left out of the number, which is then a lower
    bound, and the line says their time is unknown (a guess from other methods' rates once
    promised a 9-minute sweep 37 hours)."""

    def __init__(self, costs: list[tuple[str, float]], jobs: int):
        self.costs, self.jobs = costs, jobs
        self.left = {i: cost for i, (_, cost) in enumerate(costs)}
        self.seconds: dict[str, float] = {}
        self.units: dict[str, float] = {}

    def finished(self, index: int, seconds: float, ran: bool) -> None:
        method, cost = self.costs[index]
        self.left.pop(index, None)
        if ran:  # a cell found stored says nothing of what running one costs
            self.seconds[method] = self.seconds.get(method, 0.0) + seconds
            self.units[method] = self.units.get(method, 0.0) + cost

    def to_go(self) -> float | None:
        """Seconds the remaining cells of timed methods take (all of the time left where
        `untimed` is empty, a lower bound otherwise); None before any cell has run."""
        if not self.units:
            return None
        rates = {m: self.seconds[m] / max(u, 1e-12) for m, u in self.units.items()}
        work = sum(
            cost * rates[self.costs[i][0]]
            for i, cost in self.left.items()
            if self.costs[i][0] in rates
        )
        return work / self.jobs

    def untimed(self) -> list[str]:
        """Methods of the remaining cells none of whose cells has run yet: their time is
        unknown, and `to_go` leaves them out."""
        return sorted({self.costs[i][0] for i in self.left} - set(self.units))
