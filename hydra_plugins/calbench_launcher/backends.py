"""Where a sweep's jobs run: a pool of worker processes on this machine (`on_workers`) or
a Ray cluster (`on_ray`); each yields ``(index, JobReturn, seconds)`` as a job finishes."""

# No `from __future__ import annotations`: Hydra's plugin scan executes the modules of this
# package without registering them in sys.modules.

import sys

from hydra.core.utils import JobReturn, JobStatus

#: Why a job's worker died, as a failed cell's reason.
WORKER_DIED = "its worker process died (killed, or out of memory)"


def on_workers(run, args: list, jobs: int):
    """Each job on a pool of ``jobs`` worker processes (joblib's loky), yielded as it
    finishes. Where a worker dies, joblib stops the whole pool; the unfinished jobs then
    run each in a process of its own (`_isolated`), so a death costs its own cell only."""
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    pending = {a[0]: a for a in args}
    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    try:
        for idx, ret, seconds in parallel(delayed(run)(*a) for a in list(pending.values())):
            del pending[idx]
            yield idx, ret, seconds
        return
    except TerminatedWorkerError:
        print(
            f"[sweep] a worker process died; the {len(pending)} unfinished cell(s) run each in "
            "a process of its own",
            file=sys.stderr,
            flush=True,
        )
    yield from _isolated(run, list(pending.values()), jobs)


def _isolated(run, args: list, jobs: int):
    """Each job in a fresh one-worker process pool, ``jobs`` at a time: a job whose process
    dies is yielded as failed (`WORKER_DIED`), and the others go on."""
    from concurrent.futures import FIRST_COMPLETED, wait

    from joblib.externals.loky.process_executor import ProcessPoolExecutor

    from calbench.errors import CalbenchError

    pending, running = list(args), {}
    while pending or running:
        while pending and len(running) < jobs:
            a = pending.pop(0)
            executor = ProcessPoolExecutor(max_workers=1)
            running[executor.submit(run, *a)] = (executor, a)
        finished, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in finished:
            executor, a = running.pop(future)
            try:
                yield future.result()
            except Exception:  # the process died: loky's TerminatedWorkerError
                died = CalbenchError(WORKER_DIED)
                yield a[0], JobReturn(list(a[1]), status=JobStatus.FAILED, _return_value=died), 0.0
            executor.shutdown(wait=False)


def ray_cpus(address: str | None) -> int:
    """Join (or start) the Ray cluster; its CPUs, the cells that run at once."""
    try:
        import ray
    except ImportError:
        raise ValueError(
            "hydra.launcher.backend=ray needs Ray on this machine and the cluster's: "
            "pip install 'ray>=2.9'."
        ) from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=True)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def on_ray(run, args, retries: int):
    """Each job as a Ray task (one CPU), yielded as it finishes. A task whose worker
    process dies is run again by Ray, up to ``retries`` times; a cell that raised is not
    (its error is the job's, as on one machine)."""
    import ray

    task = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=False)(run)
    pending = [task.remote(*a) for a in args]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield from ray.get(done)
