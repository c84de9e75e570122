"""Float32 fits whose result does not depend on the CPU that runs them.

A float32 BFGS run is chaotic in its last bits: each step's rounding steers the next, and
torch's and MKL's kernels round differently with the CPU's vector width and with the number
of threads that split a reduction. Measured on DenseNet-40 CIFAR-10 (CalArena's MS, printed
log-loss 0.2270143, tolerance 5e-6), same packages, same data:

=========================================  ===========  ============
arithmetic (kernels, threads)              MS log-loss  SMS log-loss
=========================================  ===========  ============
CalArena's printed numbers                 0.2270143    0.2206202
torch and MKL on AVX2, 2 threads           0.2270150    0.2206202
torch and MKL on AVX2, 1 thread            0.2270180    0.2206202
torch and MKL on AVX2, 4 threads           0.2270066    0.2206202
torch on AVX2, MKL on AVX-512, 2 threads   0.2270060    0.2206009
torch and MKL on AVX-512, 1 thread         0.2270182    0.2206117
torch and MKL on AVX-512, 2 threads        0.2272390    0.2205988
=========================================  ===========  ============

calbench's CalArena tolerances were measured where torch ran its AVX2 kernels; on an AVX-512
machine MS and SMS left them. `pinned` runs a fit in a child interpreter (one per process,
kept) whose float32 arithmetic is the third row's: torch's AVX2 kernels
(``ATEN_CPU_CAPABILITY``), MKL's AVX2 code path in its conditional numerical reproducibility
mode (``MKL_CBWR``), one thread, whatever the CPU and the caller's thread limits. One
thread, because on two about one child process in 30 gave another fit of the same data (a
parallel reduction's order is not fixed, even in MKL's reproducible mode), and on one none
in 120. Checked on a second machine (`benchmarks/pinned_arithmetic_check.py`: 16 cores,
AVX-512, torch 2.11.0+cu130, Python 3.12, against 2 cores, torch 2.13.0+cpu, Python 3.11
here): the pinned fit's held-out log-loss was 0.22701801 on both, and 12 child processes
there gave one fit; that machine's own arithmetic gave 0.22701458 on its 16 threads and
0.22723905 on 2. Where torch has no AVX2 kernels (ARM, or an older x86 CPU) the fit runs in
this process, with one warning that its float32 trajectory may differ from CalArena's.

Not every AVX2-capable CPU gives the third row. On an AMD EPYC with AVX-512 (2 cores, torch
2.13.0+cpu, 2026-11-29) the pinned SMS fit gave 0.2205988 (held-out log-loss; CalArena
0.2206202, 2.1e-5 away, outside the 5e-6 tolerance). There MKL's mode alone decides it
(`ARITHMETICS`, each fit in a child of its own): with MKL's reproducible mode (``MKL_CBWR``
AVX2, AVX-512, AVX, SSE4_2 or AUTO) 0.2205987 to 0.2205988, with it off or ``COMPATIBLE``
0.2206202, whether torch ran its AVX2 or AVX-512 kernels, on 1 or 2 threads. calarena_cv's procedure
twin (calarena_cv_procedure) runs the fit in all eight `ARITHMETICS`, whose spread holds
CalArena's SMS numbers.
"""

from __future__ import annotations

import functools
import importlib
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import threading
import warnings

from calbench.errors import CalbenchError

# One thread: on two, about one child process in 30 gave another fit (a parallel
# reduction's order is not fixed even with MKL's reproducible mode); on one, none in 120.
PINNED_THREADS = 1
#: The child's environment: the arithmetic of the table's third row.
PINNED_ENVIRONMENT = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2",
    "MKL_NUM_THREADS": str(PINNED_THREADS),
    "OMP_NUM_THREADS": str(PINNED_THREADS),
}


#: The float32 arithmetics `in_arithmetic` runs a fit in, by name: torch's vector kernels
#: (``avx2``, or ``native``: the CPU's widest), MKL's code path (``cnr``: its conditional
#: numerical reproducibility mode on the AVX2 path, ``free``: MKL's own dispatch, CNR off)
#: and the threads (``1t``, ``2t``). ``avx2_cnr_1t`` is `PINNED_ENVIRONMENT`. On the AMD
#: EPYC (AVX-512) measured 2026-11-29, MKL's mode alone moved the SMS fit: CNR 0.2205988
#: (0.2205987 with native kernels), free 0.2206202 (CalArena's printed log-loss), with
#: either kernels and 1 or 2 threads.
ARITHMETICS = {
    f"{kernels}_{mkl}_{threads}t": {
        **({"ATEN_CPU_CAPABILITY": "avx2"} if kernels == "avx2" else {}),
        **({"MKL_CBWR": "AVX2"} if mkl == "cnr" else {}),
        "MKL_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
    }
    for kernels in ("avx2", "native")
    for mkl in ("cnr", "free")
    for threads in (1, 2)
}
#: The variables an arithmetic sets or leaves unset in its child.
_ARITHMETIC_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


@functools.cache
def can_pin() -> bool:
    """Whether this CPU runs the pinned arithmetic: x86-64 with AVX2 (torch says which
    vector kernels it would use)."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return False
    import torch

    return torch.backends.cpu.get_cpu_capability() in {"AVX2", "AVX512"}


@functools.cache
def _unpinned_warning(name: str) -> None:
    warnings.warn(
        f"{name}: this CPU ({platform.machine()}) has no AVX2, so the float32 fit runs in "
        "this process's arithmetic; its result may differ from CalArena's published number "
        "beyond the stated tolerance (see calbench.papers.calarena2026.pinned_arithmetic).",
        RuntimeWarning,
        stacklevel=3,
    )


class _Worker:
    """The child interpreter that runs pinned fits: started on first use and kept, so a fit
    costs a pickle's round trip instead of a new interpreter's start and torch's import
    (2.5 s). Requests and results travel pickled through its stdin and stdout; it ends
    when this process closes its stdin, by exiting or by being killed."""

    def __init__(self, environment: dict | None = None):
        self.environment = PINNED_ENVIRONMENT if environment is None else environment
        self.process = None
        self.errors = None
        self.lock = threading.Lock()

    def _start(self):
        self.errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=self._child_environment(),
        )

    def _child_environment(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in _ARITHMETIC_VARIABLES}
        return {**env, **self.environment, "CALBENCH_PINNED_PARENT": str(os.getpid())}

    def close(self) -> None:
        """End the child (it exits when its stdin closes)."""
        with self.lock:
            if self.process is not None:
                self.process.stdin.close()
                self.process.wait()
                self.process = None

    def call(self, function, args):
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start()
            try:
                pickle.dump((function.__module__, function.__qualname__, args), self.process.stdin)
                self.process.stdin.flush()
                status, value = pickle.load(self.process.stdout)
            except (OSError, EOFError, pickle.UnpicklingError):
                self.process.kill()
                code = self.process.wait()
                self.process = None
                self.errors.seek(0)
                lines = self.errors.read().decode(errors="replace").strip().splitlines()
                raise CalbenchError(
                    f"{function.__qualname__}: the pinned float32 fit's child process died "
                    f"(exit {code}): {lines[-1] if lines else 'no message'}"
                ) from None
        if status == "error":
            raise CalbenchError(
                f"{function.__qualname__}: the pinned float32 fit failed in its child "
                f"process: {value}"
            )
        return value


_WORKER = _Worker()
_ARITHMETIC_WORKERS: dict[str, _Worker] = {}


def pinned(function, *args):
    """``function(*args)`` computed with the pinned float32 arithmetic. ``function`` must be
    a module-level function (the child imports it by name); its arguments and result travel
    pickled through a pipe between this process and its child (`_Worker`)."""
    if not can_pin():
        _unpinned_warning(function.__qualname__)
        return function(*args)
    return _WORKER.call(function, args)


def in_arithmetic(name: str, function, *args):
    """``function(*args)`` computed in the float32 arithmetic ``name`` (`ARITHMETICS`), in a
    child interpreter of its own (kept, as `pinned`'s): for a spread over arithmetics, such
    as the procedure twin of CalArena's SMS. ``pinned`` is ``avx2_cnr_1t``'s own child."""
    if name not in ARITHMETICS:
        raise CalbenchError(f"unknown float32 arithmetic {name!r}; one of {sorted(ARITHMETICS)}")
    if name == "avx2_cnr_1t" or not can_pin():
        return pinned(function, *args)
    if name not in _ARITHMETIC_WORKERS:
        _ARITHMETIC_WORKERS[name] = _Worker(ARITHMETICS[name])
    return _ARITHMETIC_WORKERS[name].call(function, args)


def arithmetic() -> tuple[str, int]:
    """The vector kernels torch runs and its thread count, in this process."""
    import torch

    return torch.backends.cpu.get_cpu_capability(), torch.get_num_threads()


def _die_with_parent() -> None:
    """Linux: the kernel kills this child when its parent dies, even in the middle of a fit
    (stdin's end of file only ends it between fits: a killed sweep left 2.7 GB children
    computing a 5,000-class fit for minutes)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = int(os.environ.get("CALBENCH_PINNED_PARENT", "0"))
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if parent and os.getppid() != parent:  # the parent died before the line above
        os._exit(0)


def _serve() -> None:
    """The child's side: answer requests from stdin until it closes. Its own stdout is the
    channel, so anything a fit prints goes to stderr instead."""
    _die_with_parent()
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", PINNED_THREADS)))
    requests = sys.stdin.buffer
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        try:
            module, name, args = pickle.load(requests)
        except EOFError:
            return
        try:
            answer = ("ok", getattr(importlib.import_module(module), name)(*args))
        except Exception as exc:  # the parent raises it as one line
            answer = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, channel)
        channel.flush()


if __name__ == "__main__":
    _serve()
