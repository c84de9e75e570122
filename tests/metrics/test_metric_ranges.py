"""Every registered metric, on random predictions, lands in its record's range."""

import numpy as np
import pytest

from calbench.metrics import METRICS, evaluate


def _inputs(seed, n=300, k=4):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k) * 0.7, n)
    true_probs = rng.dirichlet(np.ones(k), n)
    y = np.array([rng.choice(k, p=p) for p in true_probs])
    reference = rng.dirichlet(np.ones(k), n)
    loss = rng.uniform(0, 1, (k, k))
    np.fill_diagonal(loss, 0.0)
    return probs, y, true_probs, reference, loss


def _light(name):
    # the consistency tests' default of 10,000 resamples costs seconds
    return {"n_resamples": 200} if name.endswith(("_p_value", "_accepted")) else {}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_lands_in_its_range(name):
    spec = METRICS[name]
    low, high = spec.range
    assert low < high
    assert spec.direction in ("lower", "higher", "diagnostic")
    for seed in range(3):
        probs, y, true_probs, reference, loss = _inputs(seed)
        value = evaluate(
            {name: _light(name)},
            probs,
            y=y,
            true_probs=true_probs,
            reference_probs=reference,
            loss_matrix=loss,
        )[name]
        value = np.asarray(value, dtype=np.float64)
        assert np.all(np.isfinite(value) | np.isinf(value)), (name, value)
        assert np.all((low - 1e-12 <= value) & (value <= high + 1e-12)), (name, value, spec.range)


def test_a_pack_brings_a_metric(tmp_path, monkeypatch):
    from calbench.metrics import metric_spec
    from calbench.packs import PACKS_ENV

    pack = tmp_path / "packs" / "toy_metric_pack"
    pack.mkdir(parents=True)
    (pack / "pack.yaml").write_text("title: A toy pack\npaper: Toy\nreproduce_all: []\n")
    (pack / "__init__.py").write_text(
        "from calbench.metrics import MetricSpec, UNIT\n"
        "def toy_error(probs, y):\n"
        "    return 0.25\n"
        "METRICS = {'toy_error': MetricSpec(toy_error, 'lower', UNIT)}\n"
    )
    monkeypatch.setenv(PACKS_ENV, str(tmp_path / "packs"))
    assert metric_spec("toy_error").direction == "lower"
    assert METRICS.pack_of("toy_error") == "toy_metric_pack"
    assert evaluate({"toy_error": {}}, np.full((2, 2), 0.5), y=np.array([0, 1])) == {
        "toy_error": 0.25
    }
