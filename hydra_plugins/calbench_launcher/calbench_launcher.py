"""calbench's Hydra launcher: a sweep's cells run in parallel on the machine's cores.

Each cell is one job. With ``n_jobs`` above 1 the jobs run in worker processes (joblib's
loky backend, as Hydra's joblib launcher uses); ``n_jobs=-1`` (the default) takes every core
joblib sees, ``n_jobs=1`` runs the cells one after another in the calling process (Hydra's
basic launcher). Loky gives each worker ``cores // n_jobs`` BLAS and OpenMP threads, so the
jobs and their matrix products do not oversubscribe the machine. As each cell ends the
launcher prints one line: cells finished of all, how many were found already stored, the
time spent and an estimate of the rest, each remaining cell weighed by its cost
(`calbench.runner.progress`). A cell's numbers do not depend on ``n_jobs``
(tests/runner/test_parallel_sweeps.py); pick it with ``hydra.launcher.n_jobs=N``.

Composing a job from scratch costs Hydra about 0.17 s. With ``compose=cached`` (the
default) the launcher composes what the jobs share once and each distinct swept value once
(`sweep_composer.SweepComposer`, beside this module), before any job runs, so a bad value fails
first; each job is then assembled from those parts in about a millisecond and handed to
calbench's cell as a plain resolved config, without Hydra's per-job output folder.
``compose=hydra`` composes and runs every job as Hydra's own launchers do (a folder with
the job's ``.hydra`` configs and log under ``hydra.sweep.dir``).

A cell that fails (calbench's error, a calibrator's exception, a worker process killed or out
of memory) does not stop the sweep: the other cells run, each failure is recorded with its
one-line reason in ``<results_dir>/failures.log``, one summary of them ends the sweep, and
the command exits with status 1. Rerunning the same command retries the failed cells alone
(the others are found stored). ``hydra.launcher.fail_fast=true`` stops at the first
failure instead. Where a worker process dies (killed, out of memory), the unfinished cells
run again, each in a process of its own, so the death costs its own cell only.

``backend=ray`` sends each job as a Ray task of one CPU to the cluster at ``ray_address``
("auto": the one ``ray start`` runs here; null: Ray started on this machine's cores), and
as many run at once as the cluster has CPUs; Ray runs a task again when its worker process
dies (``ray_retries``), so a killed worker's cell is rerun, not lost (tests/runner/test_ray.py).
``backend=slurm`` submits the cells as SLURM array jobs through submitit (``slurm.*``:
cells per task, resources per method, retries of a task that ended without results, a dry
run; `hydra_plugins.calbench_launcher.slurm`, tests/runner/test_slurm.py).
"""

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import open_dict

from calbench.runner.progress import SweepEstimate, cell_cost, clock
from hydra_plugins.calbench_launcher.backends import on_ray, on_workers, ray_cpus
from hydra_plugins.calbench_launcher.slurm import SlurmConf, on_slurm, slurm_conf

log = logging.getLogger(__name__)


@dataclass
class CalbenchLauncherConf:
    _target_: str = "hydra_plugins.calbench_launcher.calbench_launcher.CalbenchLauncher"
    #: Cells at once: -1 every core, 1 one by one in this process.
    n_jobs: int = -1
    #: A line per finished cell (done, found stored, elapsed, to go).
    progress: bool = True
    #: cached: each distinct part of the jobs' configs composed once; hydra: every job
    #: composed and run by Hydra (see the module docstring).
    compose: str = "cached"
    #: local: this machine's cores; ray: tasks on a Ray cluster (`pip install ray`).
    backend: str = "local"
    #: backend=ray: the cluster's address ("auto": the one `ray start` started on this
    #: machine; null: a Ray instance started for the sweep on this machine's cores).
    ray_address: Optional[str] = None  # noqa: UP045 - OmegaConf reads Optional, not X | None
    #: backend=ray: how often a cell whose worker process died is run again.
    ray_retries: int = 3
    #: Stop at the first failed cell (default: run every other cell, then report).
    fail_fast: bool = False
    #: backend=slurm: array jobs, resources, retries (`slurm.SlurmConf`).
    slurm: SlurmConf = field(default_factory=SlurmConf)


ConfigStore.instance().store(group="hydra/launcher", name="calbench", node=CalbenchLauncherConf)


def _run_one(idx: int, overrides, hydra_context, config, task_function, singleton_state, point=""):
    """One job, where it runs (a worker process, or this one): its sweep config composed
    and Hydra's job run, as Hydra's launchers do. Returns (idx, its JobReturn). ``point``:
    what tells it from the sweep's other cells (`calbench.runner.progress.sweep_points`)."""
    from calbench.runner.progress import sweep_point

    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    started = time.perf_counter()
    with sweep_point(point):
        ret = run_job(
            hydra_context=hydra_context,
            config=sweep_config,
            task_function=task_function,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    return idx, ret, time.perf_counter() - started


def _run_cell(idx: int, overrides, config: dict, choices: dict, cell, point=""):
    """One job that calbench's composer composed: calbench's cell on its plain config.
    A failure is the job's, as Hydra's ``run_job`` records it. ``point`` as `_run_one`'s."""
    from calbench.runner.progress import sweep_point

    started = time.perf_counter()
    try:
        with sweep_point(point):
            value = cell(config, choices.get("experiment"))
        status = JobStatus.COMPLETED
    except (Exception, SystemExit) as exc:  # the sweep reports it and goes on
        value, status = exc, JobStatus.FAILED
    ret = JobReturn(overrides=list(overrides), status=status, _return_value=value)
    return idx, ret, time.perf_counter() - started


def workers(n_jobs: int, n_cells: int) -> int:
    """How many cells run at once: ``n_jobs`` (-1: every core), never more than cells."""
    from joblib import cpu_count

    wanted = cpu_count() if n_jobs == -1 else n_jobs
    if wanted < 1:
        raise ValueError(f"hydra.launcher.n_jobs must be -1 (every core) or >= 1; got {n_jobs}.")
    return max(1, min(wanted, n_cells))


class Progress:
    """Finished cells of a sweep, and the line that reports them; the time left is
    `SweepEstimate`'s (each remaining cell weighed by its cost)."""

    def __init__(self, estimate: SweepEstimate, show: bool):
        self.estimate, self.show = estimate, show
        self.total, self.jobs = len(estimate.costs), estimate.jobs
        self.done = self.stored = 0
        self.started = time.perf_counter()

    def finished(self, index: int, ret: JobReturn, seconds: float) -> None:
        self.done += 1
        value = ret.return_value if ret.status == JobStatus.COMPLETED else None
        stored = bool(isinstance(value, dict) and value.get("stored_before"))
        self.stored += stored
        self.estimate.finished(index, seconds, ran=not stored)
        if not self.show:
            return
        elapsed = time.perf_counter() - self.started
        line = (
            f"[sweep] {self.done}/{self.total} cells ({self.stored} found stored) | "
            f"{clock(elapsed)} elapsed on {self.jobs} job(s)"
        )
        if self.done < self.total:
            line += _time_left(self.estimate.to_go(), self.estimate.untimed())
        print(line, flush=True)


def _time_left(known: float | None, untimed: list[str]) -> str:
    """The progress line's time left: an estimate where every remaining method has run a
    cell, else what is known and which methods' time is not."""
    names = ", ".join(m or "the others" for m in untimed[:3]) + (
        ", ..." if len(untimed) > 3 else ""
    )
    if known is None:
        return " | time left unknown until a cell has run"
    if not untimed:
        return f" | about {clock(known)} to go"
    return (
        f" | at least {clock(known)} to go, more for {names}: unknown until one of their "
        "cells has run"
    )


#: ``hydra.launcher.compose``'s and ``hydra.launcher.backend``'s values.
COMPOSE = ("cached", "hydra")
BACKENDS = ("local", "ray", "slurm")


class CalbenchLauncher(Launcher):
    def __init__(
        self,
        n_jobs: int = -1,
        progress: bool = True,
        compose: str = "cached",
        backend: str = "local",
        ray_address: str | None = None,
        ray_retries: int = 3,
        fail_fast: bool = False,
        slurm=None,
    ) -> None:
        self.n_jobs, self.progress, self.compose = n_jobs, progress, compose
        self.slurm = slurm
        self.fail_fast = fail_fast
        self.backend, self.ray_address, self.ray_retries = backend, ray_address, ray_retries
        self.config = self.task_function = self.hydra_context = None

    @property
    def checks_every_value(self) -> bool:
        """Whether `launch` composes each swept value before any job runs (the sweeper
        then need not)."""
        return self._cell() is not None

    def _cell(self):
        """calbench's cell function, where the jobs are composed by calbench."""
        if self.compose == "hydra":
            return None
        return getattr(self.task_function, "calbench_cell", None)

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config, self.task_function = config, task_function
        self.hydra_context = hydra_context

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        finished = None  # backend=slurm: its tasks, submitted once the plan is checked
        try:
            for key, value, allowed in (
                ("compose", self.compose, COMPOSE),
                ("backend", self.backend, BACKENDS),
            ):
                if value not in allowed:
                    raise ValueError(
                        f"hydra.launcher.{key} must be one of {', '.join(allowed)}; got {value!r}."
                    )
            if self.backend == "slurm":
                self.slurm = slurm_conf(self.slurm)
                tasks = -(-len(job_overrides) // max(1, int(self.slurm.cells_per_job)))
                jobs = max(1, min(int(self.slurm.max_running), tasks))
            elif self.backend == "ray":
                jobs = ray_cpus(self.ray_address)
            else:
                jobs = workers(int(self.n_jobs), len(job_overrides))
            run, args, costs = self._jobs(job_overrides, initial_job_idx)
            if self.backend == "slurm":
                folder = Path(
                    str(self.slurm.folder or Path(str(self.config.results_dir)) / "slurm")
                )
                finished = on_slurm(run, list(args), [m for m, _ in costs], self.slurm, folder)
        except ValueError as exc:  # one line, as calbench's other errors (no traceback)
            print(f"calbench: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        log.info(f"calbench launcher: {len(job_overrides)} cells on {jobs} job(s)")
        progress = Progress(SweepEstimate(costs, jobs), self.progress)
        results: dict[int, JobReturn] = {}
        if self.backend == "ray":
            finished = on_ray(run, args, self.ray_retries)
        elif self.backend == "local" and jobs == 1:
            finished = (run(*a) for a in args)
        elif self.backend == "local":
            finished = on_workers(run, list(args), jobs)
        for idx, ret, seconds in finished:
            results[idx] = ret
            progress.finished(idx - initial_job_idx, ret, seconds)
            if self.fail_fast and ret.status == JobStatus.FAILED:
                finished.close()  # joblib then cancels the cells not yet started
                break
        report_failures(
            [(job_overrides[i - initial_job_idx], r) for i, r in sorted(results.items())],
            len(job_overrides),
            Path(str(self.config.results_dir)),
        )
        return [results[initial_job_idx + i] for i in range(len(job_overrides))]

    def _jobs(self, job_overrides, initial_job_idx):
        """(the function that runs a job where it runs; each job's arguments, lazily; each
        job's method and `cell_cost`, for the sweep's estimate of the time left)."""
        from calbench.runner.progress import sweep_points

        cell, points = self._cell(), sweep_points(job_overrides)
        if cell is None:
            state = Singleton.get_state()
            context, config, task = self.hydra_context, self.config, self.task_function
            methods = [_method(overrides) for overrides in job_overrides]
            return (
                _run_one,
                (
                    (initial_job_idx + i, overrides, context, config, task, state, points[i])
                    for i, overrides in enumerate(job_overrides)
                ),
                [(m, 1.0) for m in methods],  # no config before the job composes its own
            )
        from hydra_plugins.calbench_launcher.sweep_composer import SweepComposer

        loader, master = self.hydra_context.config_loader, self.config
        composer = SweepComposer(
            lambda overrides: loader.load_sweep_config(master, overrides), job_overrides
        )
        composer.check(job_overrides)
        trees = (composer.unresolved(overrides) for overrides in job_overrides)
        costs = [((t.get("method") or {}).get("name", ""), cell_cost(t)) for t in trees]
        return (
            _run_cell,
            (
                (initial_job_idx + i, overrides, *composer.resolved(overrides), cell, points[i])
                for i, overrides in enumerate(job_overrides)
            ),
            costs,
        )


def reason(error: BaseException) -> str:
    """A failed cell's reason in one line: calbench's own message, else the exception's
    type and message (a custom calibrator's error, not its traceback)."""
    from calbench.errors import CalbenchError, file_fault

    if isinstance(error, SystemExit):  # calbench's `fail`, which printed its line already
        return "stopped with an error (see above)"
    if isinstance(error, OSError):
        error = file_fault(error)
    text = str(error) if isinstance(error, CalbenchError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split())


def report_failures(done: list, total: int, results_dir: Path) -> None:
    """After a sweep: one summary of its failed cells (``done``: (overrides, JobReturn)
    of each job that ran), each recorded in ``results_dir/failures.log``; exit status 1
    where any failed."""
    failed = [(o, r) for o, r in done if r.status == JobStatus.FAILED]
    if not failed:
        return
    shared = set.intersection(*(set(o) for o, _ in done))  # results_dir=... and the like
    lines = [
        f"{' '.join(o for o in overrides if o not in shared) or ' '.join(overrides)}: "
        f"{reason(r._return_value)}"
        for overrides, r in failed
    ]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with open(results_dir / "failures.log", "a") as log_file:
            log_file.writelines(f"{stamp} | {line}\n" for line in lines)
        where = f"; recorded in {results_dir / 'failures.log'}"
    except OSError:
        where = ""
    not_run = total - len(done)
    stored = len(done) - len(failed)
    after = (
        "The other cells are stored; the same command again retries only the failed ones."
        if stored
        else "No cell was stored."
    )
    print(
        f"\n[sweep] {len(failed)} of {total} cells failed"
        + (f", {not_run} not run (fail_fast)" if not_run else "")
        + f"{where}:\n"
        + "\n".join(f"  {line}" for line in lines)
        + f"\n{after}",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


def _method(overrides) -> str:
    return next((o.split("=", 1)[1] for o in overrides if o.startswith("method=")), "")
