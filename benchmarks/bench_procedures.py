"""The procedure twins' fits that `calbench reproduce` spends its time in, one seed each,
in CPU seconds of this process (the machine is shared: wall time says little).

    python benchmarks/bench_procedures.py [--epochs 50] [--scales cifar10,cifar100]

Valk's DEC critic (`calbench.papers.valk2022.reference_dec.train_critic`, a million Adam
steps a seed) as CPU microseconds a step, and each Keras-style twin's fit of one seed as
its cell fits it (`select_and_fit`: Gupta's five inner kfold models averaged, Valk's one
fit), at DenseNet-40 CIFAR-10's tuned penalties on over-confident logits of that shape.
Writes <out>/procedures.csv and .md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._data import overconfident_logits, write_results  # noqa: E402
from calbench.calibrators.solvers.threads import blas_threads  # noqa: E402
from calbench.papers.kull2019.keras_style import KerasStyleScaling  # noqa: E402
from calbench.papers.valk2022.reference_dec import train_critic  # noqa: E402
from calbench.papers.valk2022.reference_valk import valk_probabilities  # noqa: E402
from calbench.runner.selection import select_and_fit  # noqa: E402

_MS = {"structure": "matrix", "input_space": "logits", "l2": 250.0, "mu": 1e-4}
_DIR = {"structure": "matrix", "input_space": "probabilities", "l2": 1000.0, "mu": 0.01}
_VS = {"structure": "vector", "regularization": "none", "double_fit": False}
#: Twin -> (calibrator parameters, inner models averaged).
KERAS_TWINS = {
    "ms_odir_gupta_keras": (_MS, True),
    "dir_odir_gupta_keras": (_DIR, True),
    "vs_gupta_keras": (_VS, False),
    "ms_odir_valk_keras": ({**_MS, "patience": 50}, False),
    "dir_odir_valk_keras": ({**_DIR, "patience": 50}, False),
}
#: Adam steps of one ts_dec_valk_code fit: 100 critics of 1000 epochs of 10 steps.
STEPS_A_SEED = 100 * 1000 * 10


def critic_record(scale: str, epochs: int) -> dict:
    """CPU microseconds a step of one two-action critic (10 steps an epoch)."""
    logits, y, _, _ = overconfident_logits(scale)
    probs = valk_probabilities(logits)
    labels = np.eye(probs.shape[1], dtype=np.float32)[y]
    start = time.process_time()
    with blas_threads(1):
        train_critic(probs, labels, np.random.default_rng(0), epochs=epochs, steps=10,
                     lr=1e-2, noise=0.1, n_actions=2)  # fmt: skip
    a_step = (time.process_time() - start) / (epochs * 10)
    return {"fit": "ts_dec_valk_code critic", "shape": f"{probs.shape[0]} x {probs.shape[1]}",
            "cpu_seconds": a_step * epochs * 10, "us_a_step": a_step * 1e6,
            "cpu_seconds_a_seed": a_step * STEPS_A_SEED}  # fmt: skip


def keras_record(name: str) -> dict:
    """CPU seconds of one seed of a Keras twin, fitted as its cell fits it."""
    params, averaged = KERAS_TWINS[name]
    logits, y, _, _ = overconfident_logits("cifar10")
    calibrator = KerasStyleScaling(seed=15, loss_clip=None, **params)
    start = time.process_time()
    select_and_fit(calibrator, {}, logits, y, inner_folds=5, average_inner_models=averaged,
                   inner_cv="kfold", seed=15)  # fmt: skip
    seconds = time.process_time() - start
    return {"fit": name, "shape": f"{len(y)} x {logits.shape[1]}", "cpu_seconds": seconds,
            "us_a_step": None, "cpu_seconds_a_seed": seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=50, help="critic epochs timed")
    parser.add_argument("--scales", default="cifar10,cifar100")
    parser.add_argument("--twins", default=",".join(KERAS_TWINS))
    parser.add_argument("--out", default="results/bench")
    args = parser.parse_args()
    records = [critic_record(scale, args.epochs) for scale in args.scales.split(",")]
    records += [keras_record(name) for name in args.twins.split(",") if name]
    for record in records:
        print(record, flush=True)
    title = "Procedure twins, one seed (CPU s; the critic's seed is a million steps)"
    print(write_results(records, args.out, "procedures", title))


if __name__ == "__main__":
    main()
