"""Probe calbench with faults and bad input as a user meets them, and count the outcomes.

Each case runs the command line in a fresh folder and is classed as one of: **well**
(did the right thing: recomputed, kept both, refused with its fix), **clean error** (exit
status not 0, one `calbench: error:` line or a sweep's summary, no traceback),
**traceback**, **silent** (accepted though no meaningful result can come), **wrong result**
(a stale, merged or impossible number), **lost** (a result that was computed is gone) and
**ran code** (an untrusted pickle was unpickled). Run it against any checkout, e.g. the one
before a change (``PYTHONPATH=OLD_CHECKOUT python scripts/fault_probe.py``), to compare.

    python scripts/fault_probe.py [--out probe.csv]
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

SMALL = ["dataset.n_cal=600", "dataset.n_test=900"]
CASES = {}


def case(name):
    def register(function):
        CASES[name] = function
        return function

    return register


def calbench(*args, cwd=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "calbench.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def classed(out, expect_error=True) -> str:
    """An outcome from a command's exit status and stderr."""
    if "Traceback" in out.stderr or "Error executing job" in out.stderr:
        return "traceback"
    if out.returncode == 0:
        return "silent" if expect_error else "well"
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    if len(errors) > 3 and "[sweep]" not in out.stderr:
        return "traceback"  # pages of output are no clean error either
    return "clean error"


def rows(results) -> pd.DataFrame:
    files = sorted((Path(results) / "store").glob("*.csv"))
    return pd.concat([pd.read_csv(f) for f in files]) if files else pd.DataFrame()


def npz(path, seed=0, scale=1.0, k=3, **change):
    rng = np.random.default_rng(seed)
    z, y = rng.normal(size=(600, k)) * scale, np.arange(600) % k
    arrays = {"logits_cal": z[:300], "y_cal": y[:300], "logits_test": z[300:], "y_test": y[300:]}
    arrays.update(change)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return path


# --- the store ------------------------------------------------------------------------


def _damaged_store(d, damage):
    assert calbench("run", "-m", *SMALL, "method=ts,vs", f"results_dir={d}").returncode == 0
    target = sorted((Path(d) / "store").glob("*.csv"))[0]
    target.write_bytes(damage(target.read_bytes()))
    out = calbench("tables", "--results-dir", d)
    return classed(out) if out.returncode else "silent"


DAMAGE = {
    "cut inside a value": lambda b: b[: b.rindex(b",log_loss,") + 13],
    "cut at a line end": lambda b: b[: b.rindex(b"\n", 0, len(b) - 1) + 1],
    "header only": lambda b: b.partition(b"\n")[0] + b"\n",
    "empty": lambda b: b"",
    "random bytes": lambda b: np.random.default_rng(0).bytes(len(b)),
    "an extra field": lambda b: b.replace(b"\n", b",extra\n", 2),
    "an edited value": lambda b: b.replace(b",accuracy,0.", b",accuracy,1.", 1),
    "rows appended twice": lambda b: b + b.partition(b"\n")[2],
    "a row missing": lambda b: b"\n".join(b.split(b"\n")[:2] + b.split(b"\n")[3:]),
}
for _kind, _damage in DAMAGE.items():
    case(f"rows file: {_kind}")(lambda d, damage=_damage: _damaged_store(d, damage))


@case("shared arrays file damaged, then a new cell")
def _(d):
    assert calbench("run", *SMALL, f"results_dir={d}").returncode == 0
    for f in (Path(d) / "store" / "arrays").glob("*.npz"):
        f.write_bytes(b"garbage")
    calbench("run", *SMALL, "method=vs", f"results_dir={d}")
    out = calbench("figures", "--results-dir", d)
    return "well" if out.returncode == 0 else classed(out, expect_error=False)


@case("touch the older of two settings")
def _(d):
    for max_iter in (3, 1000):  # an edited setting that changes the numbers
        calbench("run", *SMALL, f"+method.params.max_iter={max_iter}", f"results_dir={d}")
    cells = sorted((Path(d) / "store").glob("*.csv"), key=lambda f: f.stat().st_mtime)
    shown = calbench("tables", "--results-dir", d, "--formats", "csv")
    before = (Path(d) / "tables").glob("*.csv")
    before = {f.name: f.read_text() for f in before}
    os.utime(cells[0])  # the older cell now looks newer
    shown = calbench("tables", "--results-dir", d, "--formats", "csv")
    after = {f.name: f.read_text() for f in (Path(d) / "tables").glob("*.csv")}
    return "well" if shown.returncode == 0 and after == before else "wrong result"


# --- concurrency ----------------------------------------------------------------------


@case("two rescores at once")
def _(d):
    sweep = ("run", "-m", *SMALL, "method=ts,vs,bcts", "dataset.seed=0,1,2,3,4,5")
    assert calbench(*sweep, f"results_dir={d}").returncode == 0
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "calbench.cli", "rescore", "--metrics", m, "--results-dir", d],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for m in ("mce", "confidence_ece_size15")
    ]
    [p.wait() for p in procs]
    metrics = rows(d).groupby("config_hash")["metric"].agg(set)
    return "well" if all({"mce", "confidence_ece_size15"} <= m for m in metrics) else "lost"


@case("two writers of one cell")
def _(d):
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "calbench.cli", "run", *SMALL, "method=dir_l2"]
            + [f"results_dir={d}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate() for p in procs]
    if any(p.returncode for p in procs):
        return "traceback"
    computed = sum(out.count("rows: ") for out, _ in outs)
    return "well" if computed == 1 else "silent"


# --- sweeps ---------------------------------------------------------------------------

OWN = """
import os, signal
from calbench.calibrators.scaling import TemperatureScaling
class Raises(TemperatureScaling):
    def __init__(self, criterion="nll", max_iter=1000, tol=1e-6, warm_start=False,
                 device="cpu", fail=True):
        super().__init__(criterion, max_iter, tol, warm_start, device)
        self.fail = fail
    def _fit(self, logits, y):
        if self.fail:
            raise ZeroDivisionError("my calibrator divided by zero")
        super()._fit(logits, y)
class Dies(Raises):
    def _fit(self, logits, y):
        if self.fail:
            os.kill(os.getpid(), signal.SIGKILL)
        super()._fit(logits, y)
"""


def _sweep_with(d, cls, jobs):
    (Path(d) / "own.py").write_text(OWN)
    env = {"PYTHONPATH": f"{d}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = calbench(
        "run",
        "-m",
        *SMALL,
        "dataset.seed=0,1",
        "method.name=own",  # one class, a cell that fits beside one that fails
        f"method.calibrator=own:{cls}",
        "+method.params.fail=false,true",
        f"hydra.launcher.n_jobs={jobs}",
        f"results_dir={d}/r",
        env=env,
    )
    stored = len(list((Path(d) / "r" / "store").glob("*.csv")))
    if stored < 2:
        return "lost"
    return classed(out)


case("sweep: a calibrator raises")(lambda d: _sweep_with(d, "Raises", 1))
case("sweep: a worker is killed")(lambda d: _sweep_with(d, "Dies", 2))


@case("sweep: a missing file among several paths")
def _(d):
    a = npz(Path(d) / "a.npz")
    out = calbench(
        "run", "-m", "dataset=npz", f"dataset.path={a},{d}/missing.npz", "method=ts,vs",
        f"results_dir={d}/r",
    )  # fmt: skip
    stored = len(list((Path(d) / "r" / "store").glob("*.csv")))
    return "lost" if stored < 2 else classed(out)


@case("single run: a calibrator raises")
def _(d):
    (Path(d) / "own.py").write_text(OWN)
    env = {"PYTHONPATH": f"{d}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    own = ["method.name=own", "method.calibrator=own:Raises"]
    out = calbench("run", *SMALL, *own, f"results_dir={d}/r", env=env)
    return classed(out)


# --- input files ----------------------------------------------------------------------


@case("scores written again to the same path")
def _(d):
    path = npz(Path(d) / "scores.npz")
    calbench("run", "dataset=npz", f"dataset.path={path}", f"results_dir={d}/r")
    npz(path, seed=1, scale=3.0)
    again = calbench("run", "dataset=npz", f"dataset.path={path}", f"results_dir={d}/r")
    return "wrong result" if "already in the store" in again.stdout else "well"


@case("two files named scores.npz in one experiment")
def _(d):
    a, b = npz(Path(d) / "a" / "scores.npz"), npz(Path(d) / "b" / "scores.npz", 1, 2.0)
    calbench("run", "dataset=npz", f"dataset.path={a}", f"results_dir={d}/r")
    out = calbench("run", "dataset=npz", f"dataset.path={b}", f"results_dir={d}/r")
    return "wrong result" if out.returncode == 0 else classed(out)


for _flag in ("no", "off", "'false'"):

    @case(f"pickle with dataset.trusted={_flag}")
    def _(d, flag=_flag):
        marker = Path(d) / "code_ran"

        class Payload:
            def __reduce__(self):
                return (open, (str(marker), "w"))

        with open(Path(d) / "evil.p", "wb") as f:
            pickle.dump(Payload(), f)
        out = calbench(
            "run", "dataset=kull_pickle", f"dataset.path={d}/evil.p", "++dataset.trusted=" + flag,
            f"results_dir={d}/r",
        )  # fmt: skip
        return "ran code" if marker.exists() else classed(out)


def _bad_npz(d, **change):
    path = npz(Path(d) / "bad.npz", **change)
    return classed(calbench("run", "dataset=npz", f"dataset.path={path}", f"results_dir={d}/r"))


case("complex scores")(lambda d: _bad_npz(d, logits_cal=np.ones((300, 3)) * (1 + 1j)))
case("one-hot labels")(lambda d: _bad_npz(d, y_cal=np.eye(3)[np.arange(300) % 3]))
case("one class in the calibration labels")(lambda d: _bad_npz(d, y_cal=np.zeros(300, int)))
case("fewer calibration rows than classes")(
    lambda d: _bad_npz(d, logits_cal=np.zeros((2, 3)), y_cal=np.array([0, 1]))
)


@case("a .npy file given as npz")
def _(d):
    np.save(Path(d) / "one.npy", np.zeros((4, 3)))
    return classed(calbench("run", "dataset=npz", f"dataset.path={d}/one.npy", f"results_dir={d}"))


@case("a text file given as npz")
def _(d):
    (Path(d) / "t.npz").write_text("not a zip")
    return classed(calbench("run", "dataset=npz", f"dataset.path={d}/t.npz", f"results_dir={d}"))


def _h5(d, **replace):
    import h5py

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), 60).astype(np.float32)
    arrays = {
        "probas_cal": p[:30], "labels_cal": np.arange(30) % 3,
        "probas_test": p[30:], "labels_test": np.arange(30) % 3,
    }  # fmt: skip
    path = Path(d) / "b.h5"
    with h5py.File(path, "w") as f:
        group = f.create_group("d/m")
        for key, value in {**arrays, **replace}.items():
            if callable(value):
                value(group, key)
            else:
                group.create_dataset(key, data=value)
    out = calbench("run", "dataset=hdf5", f"dataset.path={path}", "dataset.task=d/m",
                   f"results_dir={d}/r")  # fmt: skip
    return classed(out)


case("HDF5 string labels")(lambda d: _h5(d, labels_test=np.array([b"cat"] * 30)))
case("HDF5 fractional labels")(lambda d: _h5(d, labels_cal=np.arange(30) % 3 + 0.5))
case("HDF5 one-hot labels")(lambda d: _h5(d, labels_cal=np.eye(3)[np.arange(30) % 3]))


@case("HDF5 external link")
def _(d):
    import h5py

    with h5py.File(Path(d) / "other.h5", "w") as f:
        f["y"] = np.arange(30) % 3
    return _h5(
        d, labels_cal=lambda g, k: g.__setitem__(k, h5py.ExternalLink(f"{d}/other.h5", "/y"))
    )


# --- configuration --------------------------------------------------------------------

_CONFIG = {
    "method name typo": ["method=ms_odr"],
    "dataset.path without dataset=npz": ["dataset.path=scores.npz"],
    "dataset.name with ..": ["dataset.name=../up"],
    "inf in a grid": ["method=dir_odir", "method.grid.reg_lambda=[inf]"],
}
for _name, _args in _CONFIG.items():
    case(_name)(lambda d, args=_args: classed(calbench("run", *SMALL, *args, f"results_dir={d}")))


@case("results_dir empty")
def _(d):
    out = calbench("run", *SMALL, "results_dir=", cwd=d)
    return classed(out)


@case("results_dir is a file")
def _(d):
    (Path(d) / "f").write_text("x")
    return classed(calbench("run", *SMALL, f"results_dir={d}/f"))


# --- metrics --------------------------------------------------------------------------


@case("kde_ece of uniform predictions")
def _(d):
    code = (
        "import numpy as np; from calbench.metrics import kde_ece; "
        "print(kde_ece(np.full((1000, 10), 0.1), np.zeros(1000, int)))"
    )
    value = float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                 text=True).stdout)  # fmt: skip
    return "well" if 0 <= value <= 1 else "wrong result"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the outcomes as CSV")
    parser.add_argument("--only", help="cases whose name contains this")
    args = parser.parse_args()
    outcomes = []
    for name, run in CASES.items():
        if args.only and args.only not in name:
            continue
        folder = tempfile.mkdtemp(prefix="probe-")
        try:
            outcome = run(folder)
        except Exception as exc:  # the probe's own set-up failed: say so, go on
            outcome = f"probe failed ({type(exc).__name__}: {exc})"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"{outcome:14s} {name}", flush=True)
        outcomes.append({"case": name, "outcome": outcome})
    frame = pd.DataFrame(outcomes)
    print()
    print(frame["outcome"].value_counts().to_string())
    if args.out:
        frame.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
