"""The structured maps at 1,000 and 10,000 classes on 25,000 rows: each fit's time and peak
memory, calbench against probmetrics (CalArena's implementations) on the same data.

    python benchmarks/bench_many_classes.py [--classes 1000,10000] [--methods vs,svs,...]

Each fit runs in a child process of its own, so its peak resident memory is its own
(the child's ``VmHWM``, data included: 25,000 x 10,000 float64 logits are 2 GB; not
``ru_maxrss``, which survives exec and so can hold the parent's). The
data are the seeded over-confident logits of the other benches, 25,000 calibration rows and
5,000 test rows (``--rows``). A fit that calbench refuses (a full k x k map beyond
``MATRIX_MAX_CLASSES``) or that runs past ``--timeout`` is recorded as such. Writes
<out>/<stem>.csv and .md (``--stem``, default many_classes).

A row's ``classes_without_label`` counts the classes no calibration row is labelled with:
where it is not 0, vector scaling's unpenalised log-loss has no minimum (calbench warns
before the fit), and its time is its stopping rule's. ``--classes 2000 --rows 50000
--methods vs,sms`` times it beyond Newton's class limit where a minimum exists, and SMS at
the largest map calbench fits (`~calbench.calibrators.solvers.memory.MATRIX_MAX_CLASSES`).
``--params precision=float32`` sets calbench's parameters (strings), e.g. SMS's float32
products, or ``lean=always`` its lean path; ``--save DIR`` writes calbench's fitted maps
there, to compare two runs' weights.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import write_results  # noqa: E402

#: calbench method -> probmetrics' calibrator for the same map (None: no peer).
PEERS = {
    "ts": "TemperatureScalingCalibrator()",
    "vs": "VectorScalingCalibrator()",
    "svs": "SVSCalibrator()",
    "sms": "SMSCalibrator()",
    "ets": "ETSCalibrator()",
    "ms_odir": None,
    "dir_odir": None,
}

CHILD = r"""
import json, sys, time, warnings
import numpy as np
sys.path.insert(0, {root!r})
from calbench.data.synthetic import sample_labels
from calbench.simplex import softmax
from calbench.metrics import log_loss
warnings.simplefilter("ignore")
n_cal, n_test, k = {rows}, {rows} // 5, {k}
rng = np.random.default_rng(0)
u = rng.normal(size=(n_cal + n_test, k))
u[np.arange(n_cal + n_test), rng.integers(0, k, n_cal + n_test)] += np.log(k) + 1.5
y = sample_labels(softmax(u), rng)
z = 2.5 * u + rng.normal(scale=0.5, size=k)
zc, yc, zt, yt = z[:n_cal], y[:n_cal], z[n_cal:], y[n_cal:]
del u
out = {{"classes_without_label": int(k - np.unique(yc).size)}}
import torch  # imports before the clock starts: a fit's time is the fit's
if {peer!r}:
    from probmetrics.calibrators import *  # noqa: F403
from calbench.calibrators import make_calibrator
start = time.perf_counter()
if {peer!r}:
    model = {peer}
    model.fit(softmax(zc).astype(np.float32), yc)
    out["seconds"] = time.perf_counter() - start
    probs = np.asarray(model.predict_proba(softmax(zt).astype(np.float32)), dtype=np.float64)
else:
    model = make_calibrator({method!r}, **{params!r}).fit(zc, yc)
    out["seconds"] = time.perf_counter() - start
    probs = model.predict_proba(zt)
    for name in ("n_iter_", "loss_", "gradient_max_"):  # steps, objective, gradient at stop
        value = getattr(model, name, None)
        if value is not None:
            out[name.rstrip("_")] = float(value)
    if {save!r}:  # the fitted map, for comparing two fits' weights
        np.savez({save!r}, coef=model.coef_, intercept=model.intercept_)
out["test_log_loss"] = log_loss(probs / probs.sum(axis=1, keepdims=True), yt)
# this process's own peak (ru_maxrss survives exec: it would hold the parent's)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
out["peak_mb"] = int(status["VmHWM"].split()[0]) / 1024
print(json.dumps(out))
"""


def run_child(
    method: str, k: int, rows: int, peer: str | None, timeout: float, params=None, save=""
) -> dict:
    root = str(Path(__file__).resolve().parents[1])
    code = CHILD.format(
        root=root, k=k, rows=rows, peer=peer, method=method, params=params or {}, save=save
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"status": f"over {timeout:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        refusal = "calbench.errors.CalbenchError: "
        if last.startswith(refusal):  # refused before any work: what and why, briefly
            return {"status": "refused: " + last[len(refusal) :].split(" and a step")[0][:160]}
        return {"status": last[:160]}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="1000,10000")
    parser.add_argument("--methods", default=",".join(PEERS))
    parser.add_argument("--rows", type=int, default=25000, help="calibration rows (test: a fifth)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument(
        "--params",
        default="",
        help="calbench's parameters, e.g. precision=float32 (SMS's float32 products)",
    )
    parser.add_argument(
        "--save", default="", help="a folder for calbench's fitted maps (<method>_<k>.npz)"
    )
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--stem", default="many_classes", help="the output files' name")
    args = parser.parse_args()
    params = dict(item.split("=", 1) for item in args.params.split(",") if item)
    records = []
    for k in (int(c) for c in args.classes.split(",")):
        for method in args.methods.split(","):
            save = str(Path(args.save) / f"{method}_{k}.npz") if args.save else ""
            ours = run_child(method, k, args.rows, None, args.timeout, params, save)
            row = {"classes": k, "rows": args.rows, "method": method, **params}
            row["classes_without_label"] = ours.pop("classes_without_label", None)
            row.update({f"calbench_{a}": b for a, b in ours.items()})
            peer = PEERS.get(method)
            if peer and not args.no_peer:
                theirs = run_child(method, k, args.rows, peer, args.timeout)
                theirs.pop("classes_without_label", None)
                row.update({f"probmetrics_{a}": b for a, b in theirs.items()})
                if "seconds" in ours and "seconds" in theirs:
                    row["speedup"] = theirs["seconds"] / ours["seconds"]
            records.append(row)
            print(row, flush=True)
    print(write_results(records, args.out, args.stem, f"Maps at {args.classes} classes"))


if __name__ == "__main__":
    main()
