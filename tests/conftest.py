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
