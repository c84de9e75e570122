from pathlib import Path

import numpy as np
import pytest

from calbench.data import load_dataset


@pytest.fixture(scope="session")
def synthetic():
    """A small synthetic data set (same generator as the experiment, fewer test points)."""
    return load_dataset("synthetic_dirichlet", seed=0, n_cal=3000, n_test=20000)


def overconfident_logits(rng, n, k, scale=3.0):
    """Logits of a classifier that is right often and too sure of itself."""
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), y] += 2.0
    return z * scale, y


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


#: The published data beside the repository (CI and the project's machines have it; a
#: user's clone usually does not): Kull et al.'s logit pickles and UCI files.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _installed_from_shared(tmp_path_factory, folder: str, what: str):
    """A data folder holding the files of ``shared/data/<folder>``, installed the way a user
    installs them: ``calbench data fetch all --from DIR`` (their SHA-256 verified)."""
    source = SHARED_DATA / folder
    if not source.is_dir():
        pytest.skip(f"{what} are not here ({source} is absent)")
    from calbench.data.install import fetch

    data_dir = tmp_path_factory.mktemp(folder)
    fetch(["all"], data_dir, progress=False, source_dir=source)
    return data_dir


@pytest.fixture(scope="session")
def published_logits(tmp_path_factory):
    """Kull et al.'s published logit pickles that ``shared/data/logits`` has."""
    return _installed_from_shared(tmp_path_factory, "logits", "the published logits")


@pytest.fixture(scope="session")
def more_networks(tmp_path_factory):
    """``calbench data fetch all --from shared/data/more_networks`` (files in subfolders)."""
    return _installed_from_shared(tmp_path_factory, "more_networks", "the more_networks files")


def load_network(name, data_dir):
    """The registered data set ``name`` with its files in ``data_dir``, as a run loads it."""
    from calbench.conf_files import read_group
    from calbench.runner.plan import load_configured_dataset

    config = dict(read_group("dataset")[name])
    for key in ("path", "path_cal", "path_test"):
        if key in config:
            config[key] = config[key].replace("${data_dir}", str(data_dir))
    return load_configured_dataset(config)


@pytest.fixture(scope="session")
def kull_uci_files(tmp_path_factory):
    """Kull et al.'s UCI files from ``shared/data/kull_uci``."""
    return _installed_from_shared(tmp_path_factory, "kull_uci", "Kull et al.'s UCI files")


def store_row(**labels) -> dict:
    """The labels of one stored result row with neutral defaults (a holdout fold of a
    calibrator under the NLL), overridden by ``labels``."""
    return {
        "experiment": "e",
        "classifier": "none",
        "criterion": "nll",
        "loss": "zero_one",
        "shift": "none",
        "protocol": "holdout",
        "fold": 0,
        "fit_seconds": 0.0,
        "params": "{}",
        "seed": 0,
        "calbench_version": "x",
        **labels,
    }
