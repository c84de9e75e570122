"""Realistic over-confident logits at the papers' scales, generated from a seed."""

from __future__ import annotations

import numpy as np

from calbench.data.synthetic import sample_labels
from calbench.simplex import softmax

SCALES = {
    "cifar10": (5000, 10000, 10),
    "cifar100": (5000, 10000, 100),
    "imagenet": (25000, 25000, 1000),
}


def overconfident_logits(scale: str, seed: int = 0):
    """(logits_cal, y_cal, logits_test, y_test) of an over-confident net, about 70% right.

    True posteriors are ``softmax(u)`` with one favoured class per sample; labels are drawn
    from them. The net reports ``z = 2.5 u + bias``: too sharp (temperature scaling needs
    t ~ 2.5) and with a per-class bias, so per-class maps have something to learn too.
    """
    n_cal, n_test, k = SCALES[scale]
    rng = np.random.default_rng(seed)
    n = n_cal + n_test
    u = rng.normal(size=(n, k))
    u[np.arange(n), rng.integers(0, k, n)] += np.log(k) + 1.5
    y = sample_labels(softmax(u), rng)
    z = 2.5 * u + rng.normal(scale=0.5, size=k)
    return z[:n_cal], y[:n_cal], z[n_cal:], y[n_cal:]


def noisy_imagenet_logits(seed: int = 0):
    """(logits_cal, y_cal, logits_test, y_test), 25000 + 25000 rows of 1000 classes, as
    issue 42 states its harm case: logits N(0, 2) plus 8 on the label, then 23% of the
    labels redrawn at random. Every class is alike, so per-class maps can only fit noise;
    temperature scaling is the bar."""
    rng = np.random.default_rng(seed)
    n, k = 50000, 1000
    y = rng.integers(0, k, n)
    z = rng.normal(0, 2, (n, k))
    z[np.arange(n), y] += 8
    redrawn = rng.random(n) < 0.23
    y[redrawn] = rng.integers(0, k, redrawn.sum())
    return z[:25000], y[:25000], z[25000:], y[25000:]


def write_results(records: list[dict], out_dir, stem: str, title: str) -> str:
    """<out_dir>/<stem>.csv and .md, the latter labelled with the machine and peak memory."""
    import platform
    import resource
    from pathlib import Path

    import pandas as pd
    import torch

    import calbench

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(records)
    frame.to_csv(out / f"{stem}.csv", index=False)
    machine = (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch "
        f"threads, Python {platform.python_version()}, torch {torch.__version__}, "
        f"numpy {np.__version__}, calbench {calbench.__version__}"
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = (
        f"# {title}\n\nMachine: {machine}. Peak resident memory {peak_mb:.0f} MB.\n\n"
        f"{frame.to_markdown(index=False, floatfmt='.4g')}\n"
    )
    (out / f"{stem}.md").write_text(text)
    return text
