"""Offline neural logits: small torch MLPs trained deterministically on offline tabular sets.

They stand in for the papers' CIFAR logits where those are absent, always under their own
names (``offline_letter_mlp``, never "CIFAR"). The recipe is that of the papers' CNNs in
miniature: a training split the calibration and test splits never see, and training long
past the best validation loss, which makes the net over-confident (its uncalibrated
confidence-ECE is far above temperature scaling's).

Generation is seeded (split, initialisation, batch order) and runs single-threaded, so the
same versions of torch and numpy reproduce the logits bit for bit; the result is cached as
``<cache_dir>/<name>_seed<seed>.npz`` with its SHA-256 recorded beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.model_selection import train_test_split

from calbench.atomic import atomic_save_npz
from calbench.data.dataset import Dataset
from calbench.data.fetch import record_checksum, recorded_checksums, sha256_of
from calbench.data.tabular import load_keel
from calbench.errors import CalbenchError, check_int


def _train_logits(x_train, y_train, x_eval, n_classes, hidden, epochs, seed):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same sums in the same order every run
    try:
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        d = x_train.shape[1]
        net = torch.nn.Sequential(
            torch.nn.Linear(d, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, n_classes),
        )
        optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
        xt = torch.from_numpy(x_train).float()
        yt = torch.from_numpy(y_train)
        for _ in range(epochs):
            order = torch.randperm(len(xt), generator=gen)
            for start in range(0, len(xt), 128):
                batch = order[start : start + 128]
                optimiser.zero_grad()
                loss = torch.nn.functional.cross_entropy(net(xt[batch]), yt[batch])
                loss.backward()
                optimiser.step()
        with torch.no_grad():
            return [net(torch.from_numpy(x).float()).double().numpy() for x in x_eval]
    finally:
        torch.set_num_threads(threads)


def make_offline_neural(
    source: str = "letter",
    seed: int = 0,
    n_cal: int = 5000,
    n_test: int = 5000,
    hidden: int = 256,
    epochs: int = 60,
    cache_dir: str | None = "data/offline",
    name: str | None = None,
) -> Dataset:
    """An MLP's logits on calibration and test splits of the KEEL set ``source``."""
    n_cal = check_int(n_cal, "n_cal", "offline_neural")
    n_test = check_int(n_test, "n_test", "offline_neural")
    name = name or f"offline_{source}_mlp"
    cache = Path(cache_dir) / f"{name}_seed{seed}_e{epochs}_h{hidden}.npz" if cache_dir else None
    if cache is not None and cache.is_file():
        known = recorded_checksums(cache.parent).get(cache.name)
        if known is None or sha256_of(cache) != known:
            raise CalbenchError(
                f"{cache} does not match the checksum recorded when it was generated; "
                "delete it and it will be generated again."
            )
        with np.load(cache) as f:
            return Dataset(
                name,
                f["logits_cal"],
                f["y_cal"],
                f["logits_test"],
                f["y_test"],
                class_names=[str(c) for c in f["class_names"]],
                source=str(cache),
            )
    x, y, class_names = load_keel(source)
    if n_cal + n_test >= len(y):
        raise CalbenchError(
            f"{source} has {len(y)} samples; n_cal + n_test = {n_cal + n_test} leaves none "
            "to train the network on."
        )
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=n_test, stratify=y, random_state=seed
    )
    x_train, x_cal, y_train, y_cal = train_test_split(
        x_rest, y_rest, test_size=n_cal, stratify=y_rest, random_state=seed
    )
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-12
    scaled = [(a - mean) / std for a in (x_train, x_cal, x_test)]
    logits_cal, logits_test = _train_logits(
        scaled[0], y_train, scaled[1:], len(class_names), hidden, epochs, seed
    )
    dataset = Dataset(
        name,
        logits_cal,
        y_cal,
        logits_test,
        y_test,
        class_names=class_names,
        source=f"{source} MLP (seed {seed})",
    )
    if cache is not None:
        atomic_save_npz(
            cache,
            logits_cal=logits_cal,
            y_cal=y_cal,
            logits_test=logits_test,
            y_test=y_test,
            class_names=np.array(class_names),
        )
        record_checksum(cache.parent, cache.name, sha256_of(cache))
    return dataset
