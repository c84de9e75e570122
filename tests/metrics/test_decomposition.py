"""The Brier decomposition (Murphy 1973; Stephenson et al. 2008) against its identity and
Murphy's grouped formula written with pandas."""

import numpy as np
import pandas as pd
import pytest

from calbench.metrics import METRICS
from calbench.metrics.decomposition import brier_decomposition
from calbench.metrics.scoring import brier


@pytest.mark.parametrize("binning", ["equal_width", "equal_size"])
@pytest.mark.parametrize("n_bins", [1, 7, 15])
def test_the_four_terms_add_up_to_the_brier_score(binning, n_bins):
    rng = np.random.default_rng(n_bins)
    z = rng.normal(size=(2000, 6)) * 2
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = (p.cumsum(axis=1) > rng.random((2000, 1))).argmax(axis=1)
    t = brier_decomposition(p, y, n_bins, binning)
    total = t["reliability"] - t["resolution"] + t["uncertainty"] + t["within_bins"]
    assert total == pytest.approx(brier(p, y), abs=1e-12)


def test_murphys_terms_where_forecasts_are_constant_within_bins():
    """Two classes, forecasts on the bin mid-points 0.05 .. 0.95: every bin holds one
    forecast value, so the within-bin term is 0 and Murphy's grouped formula, per class,
    gives reliability and resolution."""
    rng = np.random.default_rng(0)
    f = (rng.integers(0, 10, 5000) + 0.5) / 10
    y = (rng.random(5000) < np.clip(f + 0.1, 0, 1)).astype(int)
    probs = np.column_stack([1 - f, f])
    t = brier_decomposition(probs, y, n_bins=10)
    expected = dict.fromkeys(("reliability", "resolution", "uncertainty"), 0.0)
    for j in range(2):
        frame = pd.DataFrame({"f": probs[:, j], "o": (y == j).astype(float)})
        groups = frame.groupby("f")["o"].agg(["size", "mean"])
        base = frame["o"].mean()
        weights = groups["size"] / len(frame)
        expected["reliability"] += float((weights * (groups.index - groups["mean"]) ** 2).sum())
        expected["resolution"] += float((weights * (groups["mean"] - base) ** 2).sum())
        expected["uncertainty"] += base * (1 - base)
    for name, value in expected.items():
        assert t[name] == pytest.approx(value, abs=1e-12), name
    assert t["within_bins"] == pytest.approx(0.0, abs=1e-12)
    # The forecasts are 0.1 too low: reliability is about 2 classes x 0.1^2.
    assert t["reliability"] == pytest.approx(0.02, abs=0.004)


def test_the_terms_are_registered_metrics():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=500)
    y = rng.integers(0, 4, 500)
    values = {m: METRICS[f"brier_{m}"].function(p, y) for m in ("reliability", "uncertainty")}
    assert values == pytest.approx(
        {m: brier_decomposition(p, y)[m] for m in ("reliability", "uncertainty")}
    )
    assert METRICS["brier_resolution"].higher_is_better
