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
from sklearn.model_selection import train_test_split

from calbench.atomic import atomic_save_npz
from calbench.data.dataset import Dataset
from calbench.data.fetch import record_checksum, recorded_checksums, sha256_of
from calbench.data.tabular import load_keel
from calbench.errors import CalbenchError, check_int
from calbench.hashing import config_hash
from calbench.lazy import LazyModule

torch = LazyModule("torch")


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


def gaussian_classes(priors, n: int, n_features: int, separation: float, seed: int):
    """``n`` samples of isotropic unit Gaussians around random class means (scale
    ``separation``), with class counts in the proportions ``priors`` (exactly, up to
    rounding): labelled synthetic data of a given class balance."""
    priors = np.asarray(priors, dtype=np.float64)
    if priors.ndim != 1 or len(priors) < 2 or (priors <= 0).any() or abs(priors.sum() - 1) > 1e-6:
        raise CalbenchError(
            f"offline_neural (gaussian): priors must be >= 2 positive numbers summing to 1; "
            f"got {priors.tolist()}."
        )
    counts = np.floor(priors * n).astype(int)
    counts[np.argsort(priors * n - counts)[::-1][: n - counts.sum()]] += 1  # largest remainders
    rng = np.random.default_rng(seed)
    means = separation * rng.standard_normal((len(priors), n_features))
    y = rng.permutation(np.repeat(np.arange(len(priors)), counts))
    return means[y] + rng.standard_normal((n, n_features)), y


def _source_data(source, gaussian, n_eval, seed):
    if source != "gaussian":
        return load_keel(source)
    options = dict(gaussian or {})
    names = options.pop("class_names", None)
    n_train = check_int(options.pop("n_train", 0), "gaussian.n_train", "offline_neural")
    try:
        x, y = gaussian_classes(n=n_train + n_eval, seed=seed, **options)
    except TypeError as error:
        raise CalbenchError(
            f"offline_neural (gaussian): {error}; options are priors, class_names, n_train, "
            "n_features, separation."
        ) from None
    k = int(y.max()) + 1
    names = [str(c) for c in names] if names else [f"class_{c}" for c in range(k)]
    if len(names) != k:
        raise CalbenchError(f"offline_neural (gaussian): {len(names)} class_names for {k} priors.")
    return x, y, names


def make_offline_neural(
    source: str = "letter",
    seed: int = 0,
    n_cal: int = 5000,
    n_test: int = 5000,
    hidden: int = 256,
    epochs: int = 60,
    cache_dir: str | None = "data/offline",
    name: str | None = None,
    gaussian: dict | None = None,
) -> Dataset:
    """An MLP's logits on calibration and test splits of the KEEL set ``source``, or with
    ``source="gaussian"`` of synthetic classes (``gaussian``: priors, class_names, n_train,
    n_features, separation; see `gaussian_classes`)."""
    n_cal = check_int(n_cal, "n_cal", "offline_neural")
    n_test = check_int(n_test, "n_test", "offline_neural")
    name = name or f"offline_{source}_mlp"
    # Every option that changes the logits names the cache file.
    key = config_hash({"source": source, "n_cal": n_cal, "n_test": n_test, "gaussian": gaussian})
    stem = f"{name}_seed{seed}_e{epochs}_h{hidden}_{key[:8]}"
    cache = Path(cache_dir) / f"{stem}.npz" if cache_dir else None
    if cache is not None and cache.is_file():
        return _cached(cache, name)
    x, y, class_names = _source_data(source, gaussian, n_cal + n_test, seed)
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
        _save(cache, logits_cal, y_cal, logits_test, y_test, class_names)
    return dataset


def _cached(cache: Path, name: str) -> Dataset:
    """The logits generated before, checked against the checksum recorded then."""
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


def _save(cache: Path, logits_cal, y_cal, logits_test, y_test, class_names) -> None:
    """The generated logits, as trained, kept for the next run with their checksum."""
    atomic_save_npz(
        cache,
        logits_cal=logits_cal,
        y_cal=y_cal,
        logits_test=logits_test,
        y_test=y_test,
        class_names=np.array(class_names),
    )
    record_checksum(cache.parent, cache.name, sha256_of(cache))
