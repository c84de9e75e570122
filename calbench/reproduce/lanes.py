"""A reproduction's lanes: its stages (a preset's sweep, a procedure twin) run side by side,
each lane's lines led by its stage's name (`say`)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass

#: The stages a reproduction runs at once (``--lanes``): a preset's sweep and each of its
#: procedure twins, of every preset for ``all``. Each sweep keeps its own jobs (one a
#: core); a second stage beside it fills the cores a sweep leaves idle in its one-cell
#: batches, its tails and its children's start-up.
LANES = 2
#: The stage whose lane this thread runs (None outside lanes).
_lane: contextvars.ContextVar[str | None] = contextvars.ContextVar("lane", default=None)
_say_lock = threading.Lock()


def say(text: str) -> None:
    """Print a line of a reproduction's progress; in a lane, led by its stage's name, so
    that two stages' lines can be told apart."""
    lane = _lane.get()
    with _say_lock:
        print(text if lane is None else f"[{lane}] {text}", flush=True)


@dataclass(frozen=True)
class Stage:
    """A part of a reproduction that runs on its own: a preset's sweep, or one procedure
    twin until held. ``name`` leads its lines in a lane; ``minutes``, what it is expected
    to cost, puts the costliest first; ``first`` stages start before the others (a
    preset's sweep: until its own values are stored its twins cannot tell which numbers
    they need not verify, and run on)."""

    name: str
    minutes: float
    run: Callable[[], None]
    first: bool = False


def in_lanes(stages: list[Stage], lanes: int) -> None:
    """Run the stages, ``lanes`` at a time, the ``first`` ones first, each group the
    costliest first (the longest ones must not start last), each in a lane named by it;
    with one lane one after another as given. A stage that fails (or Ctrl-C) stops every
    stage not yet started; the error is raised once the running ones have finished."""
    if lanes <= 1 or len(stages) <= 1:
        for stage in stages:
            stage.run()
        return
    stop = threading.Event()

    def in_lane(stage):
        if stop.is_set():  # a stage failed: start no other
            return
        _lane.set(stage.name)
        try:
            stage.run()
        except BaseException:
            stop.set()
            raise

    order = sorted(stages, key=lambda s: (not s.first, -s.minutes))
    with ThreadPoolExecutor(max_workers=lanes) as pool:
        futures = [pool.submit(in_lane, s) for s in order]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:  # Ctrl-C: the running stages' children got it too
            stop.set()
            raise
    for future in futures:
        future.result()


def lane() -> str | None:
    """The stage whose lane this thread runs, None outside the lanes."""
    return _lane.get()
