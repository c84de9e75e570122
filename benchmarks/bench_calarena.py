"""calbench against CalArena's engine (probmetrics), method by method, in one process.

    python benchmarks/bench_calarena.py [--pickle FILE] [--npz FILE] [--methods ...] --out DIR

(`make bench` runs it twice: every method on the seeded shapes, and TS, VS, SVS and SMS,
SMS also with float32 products (``sms:float32``, `VARIANTS`), on the two networks' files
under ``$(DATA)`` where they are present.)

Each method is timed as CalArena times it (fit then predict on the test part, best of
``--repeats``), on the same float32 probabilities for both engines, at two shapes: 10
classes (Kull et al.'s DenseNet-40 CIFAR-10 pickle with ``--pickle``, else seeded
CIFAR-10-shaped logits) and 100 classes (netcal's DenseNet-BC-100 CIFAR-100 npz with
``--npz``, split 5000 / 5000 as calbench splits it, else seeded CIFAR-100-shaped logits).
The ratio is probmetrics' seconds over calbench's (above 1: calbench is faster); the
held-out float32 log-loss of both is reported beside it.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
import warnings

import numpy as np

from benchmarks._data import overconfident_logits, write_results
from calbench.calibrators import make_calibrator
from calbench.metrics.scoring import log_loss
from calbench.simplex import float32_softmax, probs_to_logits

#: calbench's method -> probmetrics' calibrator as CalArena's run_benchmark.py builds it.
PEERS = {
    "ts": lambda pc: pc.TemperatureScalingCalibrator(),
    "vs_logp": lambda pc: pc.VectorScalingCalibrator(),
    "svs": lambda pc: pc.SVSCalibrator(),
    "sms": lambda pc: pc.SMSCalibrator(),
    "ms_calarena": lambda pc: pc.MatrixScalingCalibrator(),
    "sms_calarena": lambda pc: pc.SMSCalibrator(),
    "venn_abers_calarena": lambda pc: pc.VennAbersCalibrator(),
    "ets": lambda pc: pc.ETSCalibrator(),
    "dir_odir_calarena": lambda pc: pc.DirichletCalibrator(n_cv=0, reg_lambda=1e-3, reg_mu=1e-3),
    "histbin_uniform_prior": lambda pc: pc.MulticlassOneVsRestCalibrator(
        pc.BinaryHistogramBinningCalibrator()
    ),
    "isotonic_calarena": lambda pc: pc.SklearnCalibrator(method="isotonic", cv="prefit"),
    "cir": lambda pc: pc.MulticlassOneVsRestCalibrator(pc.CenteredIsotonicRegressionCalibrator()),
    "kernel_nw": lambda pc: pc.KernelCalibrator(),
    "xgboost": lambda pc: pc.XGBoostCalibrator(),
    "lightgbm": lambda pc: pc.LightGBMCalibrator(),
    "bbq": lambda pc: pc.NetcalBBQCalibrator(),
}


#: Rows that run a method with parameters set, against the method's peer: name -> (method,
#: its parameters). ``sms:float32``: SMS with float32 products (``precision``);
#: ``:tol1e-5``: stopped at a largest gradient entry of 1e-5, as probmetrics' L-BFGS is.
VARIANTS = {
    "sms:float32": ("sms", {"precision": "float32"}),
    "sms:tol1e-5": ("sms", {"tol": 1e-5}),
    "sms:float32:tol1e-5": ("sms", {"precision": "float32", "tol": 1e-5}),
}


def _present(path, which):
    """``path`` where it names a file; else None, said, so the seeded shape stands in."""
    if path and not os.path.isfile(path):
        print(f"{which} {path} not found: seeded logits instead", flush=True)
        return None
    return path


def _shapes(args):
    if _present(args.pickle, "--pickle"):
        with open(args.pickle, "rb") as f:
            (zc, yc), (zt, yt) = pickle.load(f, encoding="latin1")
        yield (
            "DenseNet-40 CIFAR-10",
            float32_softmax(zc),
            yc.ravel(),
            float32_softmax(zt),
            yt.ravel(),
        )  # noqa: E501
    else:
        zc, yc, zt, yt = overconfident_logits("cifar10")
        yield "seeded 5000 x 10", float32_softmax(zc), yc, float32_softmax(zt), yt
    if _present(args.npz, "--npz"):
        from calbench.data.split import split_rows

        data = np.load(args.npz)  # netcal's files: predictions, ground_truth
        p, y = data["predictions"].astype(np.float32), data["ground_truth"].astype(int)
        cal, test = split_rows(y, 5000, 0)
        yield "DenseNet-BC-100 CIFAR-100", p[cal], y[cal], p[test], y[test]
    else:
        zc, yc, zt, yt = overconfident_logits("cifar100")
        yield "seeded 5000 x 100", float32_softmax(zc), yc, float32_softmax(zt), yt


def _best_in_turns(engines, repeats):
    """Each engine's best time of ``repeats`` runs, taken in turns, so that a slow spell
    of a shared machine falls on both engines rather than on one; and each engine's last
    output. Each timed run follows an untimed one of the same engine: the other engine's
    thread pools (torch's OpenMP, OpenBLAS) spin for a while after it returns, which a run
    in a sweep never meets."""
    best, out = [np.inf] * len(engines), [None] * len(engines)
    for _ in range(repeats):
        for i, fit_predict in enumerate(engines):
            fit_predict()
            start = time.perf_counter()
            out[i] = fit_predict()
            best[i] = min(best[i], time.perf_counter() - start)
    return best, out


def main() -> None:
    import probmetrics.calibrators as pc

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pickle")
    parser.add_argument("--npz")
    parser.add_argument("--methods", nargs="*", default=list(PEERS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--stem", default="calarena_speed", help="the result files' name")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    records = []
    for shape, pc32, yc, pt32, yt in _shapes(args):
        lc, lt = probs_to_logits(pc32), probs_to_logits(pt32)
        for name in args.methods:
            method, params = VARIANTS.get(name, (name, {}))

            def ours(method=method, params=params, lc=lc, yc=yc, lt=lt):
                return make_calibrator(method, **params).fit(lc, yc).predict_proba(lt)

            def theirs(method=method, pc32=pc32, yc=yc, pt32=pt32):
                fitted = PEERS[method](pc).fit(pc32, yc)
                out = np.asarray(fitted.predict_proba(pt32), dtype=np.float64)
                return out / out.sum(axis=1, keepdims=True)  # float32 rows, summed in float64

            try:
                (peer_s, ours_s), (peer_p, ours_p) = _best_in_turns([theirs, ours], args.repeats)
            except ImportError as exc:  # dirichletcal does not build on every machine
                print(f"{name}: probmetrics' peer unavailable ({exc}); skipped", flush=True)
                continue
            records.append(
                {
                    "shape": shape,
                    "method": name,
                    "calbench_s": round(ours_s, 4),
                    "probmetrics_s": round(peer_s, 4),
                    "speed_ratio": round(peer_s / ours_s, 2),
                    "calbench_log_loss": round(log_loss(ours_p, yt, floor="float32"), 6),
                    "probmetrics_log_loss": round(log_loss(peer_p, yt, floor="float32"), 6),
                }
            )
            print(records[-1], flush=True)
    title = "calbench against probmetrics (CalArena's engine): fit + predict, best of turns"
    print(write_results(records, args.out, args.stem, title))


if __name__ == "__main__":
    main()
