"""``hydra.launcher.backend=slurm``: a sweep's cells as SLURM array jobs, through submitit.

The cells are grouped by the resources their method asks for (``slurm.by_method``, else
the defaults), each group cut into tasks of ``slurm.cells_per_job`` cells, and each group
submitted as one array job (submitit's ``executor.batch()``), at most ``slurm.max_running``
tasks of it at once. A task runs its cells one after another in one process and writes each
to the shared results store under the store's own locks, so tasks never collide and a cell
already stored is found, not recomputed.

A task that ends without its results (cancelled, killed, its node lost, out of memory or
time) is submitted again, up to ``slurm.retries`` times; its finished cells are then found
stored and only the rest run. A task preempted or at its time limit is requeued by
submitit itself (the task is `Checkpointable`). A cell that fails inside a task is reported
with its one-line reason, as on local cores. ``slurm.dry_run=true`` prints the array jobs
that would be submitted (cells, tasks, resources, sbatch parameters) and submits nothing.

A task's end is read from its result file and from ``squeue``, not from ``sacct``, so
clusters without job accounting work too.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The resource keys a method may set in ``slurm.by_method`` (submitit's names).
RESOURCE_KEYS = ("cpus_per_task", "mem_gb", "timeout_min", "gpus_per_node")


@dataclass
class SlurmConf:
    """``hydra.launcher.slurm``: where and how the array jobs run."""

    #: submitit's folder of job scripts, logs and results (default: <results_dir>/slurm).
    folder: Any = None
    partition: Any = None  # noqa: UP045 - OmegaConf reads Any, not X | None
    #: Cells run one after another in one array task.
    cells_per_job: int = 1
    #: Array tasks running at once (sbatch --array=...%N).
    max_running: int = 64
    cpus_per_task: int = 1
    mem_gb: float = 4.0
    timeout_min: int = 60
    gpus_per_node: int = 0
    #: Per method, any of RESOURCE_KEYS: ``+hydra.launcher.slurm.by_method.sms.mem_gb=20``.
    by_method: dict = field(default_factory=dict)
    #: How often a task that ended without its results is submitted again.
    retries: int = 2
    #: Print the array jobs that would be submitted, and submit nothing.
    dry_run: bool = False
    #: Seconds between two looks at the queue.
    poll_s: float = 2.0
    #: Further sbatch options (``{account: lab, qos: short}``).
    additional: dict = field(default_factory=dict)


@dataclass
class ArrayJob:
    """One array job: the resources its tasks share and each task's cells (job arguments)."""

    resources: dict
    tasks: list[list[tuple]]
    methods: list[str]


class CellTask:
    """One array task: its cells, each run as on local cores (`run(*arguments)` gives
    ``(index, JobReturn, seconds)``). Requeued as it is when preempted or out of time."""

    def __init__(self, run, cells: list[tuple]):
        self.run, self.cells = run, cells

    def __call__(self):
        return [self.run(*cell) for cell in self.cells]

    def checkpoint(self, *args, **kwargs):
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def resources_of(method: str, conf: SlurmConf) -> dict:
    """The defaults, with what ``by_method[method]`` sets instead."""
    own = dict(conf.by_method.get(method) or {})
    unknown = sorted(set(own) - set(RESOURCE_KEYS))
    if unknown:
        raise ValueError(
            f"hydra.launcher.slurm.by_method.{method} sets {', '.join(unknown)}; a method may "
            f"set {', '.join(RESOURCE_KEYS)}."
        )
    return {key: own.get(key, getattr(conf, key)) for key in RESOURCE_KEYS}


def plan_arrays(args: list[tuple], methods: list[str], conf: SlurmConf) -> list[ArrayJob]:
    """The cells grouped by their method's resources, cut into tasks of ``cells_per_job``."""
    if int(conf.cells_per_job) < 1:
        raise ValueError(
            f"hydra.launcher.slurm.cells_per_job must be >= 1; got {conf.cells_per_job}."
        )
    groups: dict[tuple, tuple[list, list]] = {}
    for cell, method in zip(args, methods, strict=True):
        resources = resources_of(method, conf)
        cells, names = groups.setdefault(tuple(sorted(resources.items())), ([], []))
        cells.append(cell)
        if method not in names:
            names.append(method)
    size = int(conf.cells_per_job)
    return [
        ArrayJob(dict(key), [cells[i : i + size] for i in range(0, len(cells), size)], names)
        for key, (cells, names) in groups.items()
    ]


def sbatch_parameters(array: ArrayJob, conf: SlurmConf) -> dict:
    """submitit's parameters for one array job."""
    parameters = dict(array.resources)
    if not parameters.get("gpus_per_node"):
        parameters.pop("gpus_per_node", None)
    parameters["slurm_array_parallelism"] = int(conf.max_running)
    if conf.partition:
        parameters["slurm_partition"] = str(conf.partition)
    if conf.additional:
        parameters["slurm_additional_parameters"] = dict(conf.additional)
    return parameters


def dry_run_text(arrays: list[ArrayJob], conf: SlurmConf, folder: Path) -> str:
    cells = sum(len(task) for array in arrays for task in array.tasks)
    lines = [
        f"[slurm] dry run: {cells} cell(s) in {len(arrays)} array job(s), "
        f"{conf.cells_per_job} cell(s) a task, folder {folder}; nothing submitted."
    ]
    for n, array in enumerate(arrays, 1):
        shown = ", ".join(f"{k}={v}" for k, v in sbatch_parameters(array, conf).items())
        lines.append(
            f"  array {n}: {len(array.tasks)} task(s) | {shown} | methods: "
            + ", ".join(array.methods)
        )
    return "\n".join(lines)


def _executor(folder: Path):
    try:
        import submitit
    except ImportError:
        raise ValueError(
            "hydra.launcher.backend=slurm needs submitit: pip install 'calbench[slurm]'."
        ) from None
    return submitit.AutoExecutor(folder=str(folder), cluster="slurm")


def _submit(executor, array: ArrayJob, conf: SlurmConf, run) -> list:
    """``array``'s tasks as one SLURM array job (one task: a plain job)."""
    executor.update_parameters(**sbatch_parameters(array, conf))
    with executor.batch():
        return [executor.submit(CellTask(run, task)) for task in array.tasks]


@dataclass
class _Submitted:
    """One task in SLURM: its job, its array's resources, its cells, how often it was
    submitted again, and how often it was seen gone from the queue without its results."""

    job: Any
    array: ArrayJob
    cells: list
    attempt: int = 0
    gone: int = 0


def _in_queue(job_ids: list[str]) -> set[str]:
    """The ids among ``job_ids`` that SLURM still holds (pending, running, completing)."""
    if not job_ids:
        return set()
    listed = subprocess.run(
        [
            "squeue",
            "-h",
            "-r",
            "-o",
            "%i",
            "-j",
            ",".join(sorted({j.split("_")[0] for j in job_ids})),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return set(listed.stdout.split()) & set(job_ids)


def _failed(cells: list[tuple], why: str):
    """Each cell of a task that never gave results, as a failed job."""
    from hydra.core.utils import JobReturn, JobStatus

    from calbench.errors import CalbenchError

    for cell in cells:
        yield (
            cell[0],
            JobReturn(list(cell[1]), status=JobStatus.FAILED, _return_value=CalbenchError(why)),
            0.0,
        )


def slurm_conf(conf) -> SlurmConf:
    """``hydra.launcher.slurm`` (a dict or Hydra's node) as a `SlurmConf`."""
    if conf is None or isinstance(conf, SlurmConf):
        return conf or SlurmConf()
    from omegaconf import OmegaConf

    values = OmegaConf.to_container(conf, resolve=True) if OmegaConf.is_config(conf) else conf
    unknown = sorted(set(values) - set(SlurmConf.__dataclass_fields__))
    if unknown:
        raise ValueError(
            f"hydra.launcher.slurm has no key {unknown[0]}; its keys are "
            + ", ".join(SlurmConf.__dataclass_fields__)
            + "."
        )
    return SlurmConf(**values)


def on_slurm(run, args: list[tuple], methods: list[str], conf: SlurmConf, folder: Path) -> Iterator:
    """Every cell through SLURM, yielded as ``(index, JobReturn, seconds)`` as its task ends.
    The plan is checked (a ValueError), or printed and the sweep stopped (``dry_run``),
    before anything is submitted."""
    arrays = plan_arrays(args, methods, conf)
    if conf.dry_run:
        print(dry_run_text(arrays, conf, folder), flush=True)
        raise SystemExit(0)
    return _watched(_executor(folder), arrays, run, conf, len(args))


def _watched(executor, arrays: list[ArrayJob], run, conf: SlurmConf, n_cells: int) -> Iterator:
    pending = [
        _Submitted(job, array, cells)
        for array in arrays
        for job, cells in zip(_submit(executor, array, conf, run), array.tasks, strict=True)
    ]
    print(
        f"[slurm] {n_cells} cell(s) in {len(pending)} task(s) of {len(arrays)} array job(s), "
        "submitted to SLURM",
        file=sys.stderr,
        flush=True,
    )
    while pending:
        queued = _in_queue([str(t.job.job_id) for t in pending])
        still = []
        for task in pending:
            if task.job.paths.result_pickle.exists():
                yield from _results(task.job, task.cells)
            elif str(task.job.job_id) in queued:
                still.append(task)
            elif task.gone < 1:  # left the queue: its result file may be a moment behind
                task.gone += 1
                still.append(task)
            elif task.attempt < int(conf.retries):
                print(
                    f"[slurm] task {task.job.job_id} ended without its results; submitted "
                    f"again ({task.attempt + 1} of {conf.retries})",
                    file=sys.stderr,
                    flush=True,
                )
                alone = ArrayJob(task.array.resources, [task.cells], task.array.methods)
                job = _submit(executor, alone, conf, run)[0]
                still.append(_Submitted(job, task.array, task.cells, task.attempt + 1))
            else:
                yield from _failed(
                    task.cells,
                    f"its SLURM task {task.job.job_id} ended without results "
                    f"{task.attempt + 1} time(s) (killed, out of memory or time; see "
                    f"{task.job.paths.stderr})",
                )
        pending = still
        if pending:
            time.sleep(float(conf.poll_s))


def _results(job, cells: list[tuple]):
    try:
        yield from job.result()
    except Exception as exc:  # the task itself failed (it could not start, unpickle, ...)
        last = (str(exc).strip().splitlines() or [""])[-1]
        yield from _failed(
            cells, f"its SLURM task {job.job_id} failed: {type(exc).__name__}: {last}"
        )
