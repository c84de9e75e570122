"""Data loading, the synthetic experiment's generator and validation of bad input."""

import pickle

import numpy as np
import pytest

from calbench.calibrators import make_calibrator
from calbench.data import load_dataset
from calbench.errors import CalbenchError


def test_synthetic_is_seeded_and_shaped_as_valk_4_2():
    a = load_dataset("synthetic_dirichlet", seed=7)
    b = load_dataset("synthetic_dirichlet", seed=7)
    c = load_dataset("synthetic_dirichlet", seed=8)
    assert a.logits_cal.shape == (5000, 3) and a.logits_test.shape == (100000, 3)
    assert not a.is_logits
    np.testing.assert_array_equal(a.logits_test, b.logits_test)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_test, c.y_test)
    # Dirichlet(0.5, 0.5, 0.5): each class's mean is 1/3 and variance 1/3 * 2/3 / 2.5.
    p = a.probs_test
    np.testing.assert_allclose(p.mean(axis=0), 1 / 3, atol=0.005)
    np.testing.assert_allclose(p.var(axis=0), (2 / 9) / 2.5, atol=0.003)


def test_synthetic_labels_follow_the_true_map(synthetic):
    c = synthetic.true_map(synthetic.probs_test)
    assert np.allclose(c.sum(axis=1), 1)
    # Observed class frequencies within bins of c_1 match c_1.
    for lo in (0.1, 0.4, 0.7):
        inside = (c[:, 0] >= lo) & (c[:, 0] < lo + 0.1)
        assert (synthetic.y_test[inside] == 0).mean() == pytest.approx(
            c[inside, 0].mean(), abs=0.03
        )


def test_true_map_is_overconfident_asymmetric_and_outside_dirichlet_family(synthetic):
    p = synthetic.probs_test
    c = synthetic.true_map(p)
    assert c.max(axis=1).mean() < p.max(axis=1).mean() - 0.03  # over-confident predictions
    # Asymmetric: permuting the classes of p does not permute c.
    perm = [1, 2, 0]
    assert np.abs(synthetic.true_map(p[:, perm]) - c[:, perm]).max() > 0.05
    # Not a Dirichlet map: the best Dirichlet fit on 20000 points with their *true*
    # probabilities as soft targets still leaves a clear gap.
    big = load_dataset("synthetic_dirichlet", seed=1, n_cal=20000, n_test=10)
    dirichlet = make_calibrator("dir").fit(big.logits_cal, big.y_cal)
    gap = np.abs(dirichlet.predict_proba(synthetic.logits_test) - c).mean()
    assert gap > 0.004


def test_npz_with_logits_and_with_probabilities(tmp_path, rng):
    z = rng.normal(size=(40, 4))
    y = rng.integers(0, 4, 40)
    np.savez(tmp_path / "a.npz", logits_cal=z[:20], y_cal=y[:20], logits_test=z[20:], y_test=y[20:])
    ds = load_dataset("npz", path=tmp_path / "a.npz")
    assert ds.name == "a" and ds.is_logits and ds.n_classes == 4
    np.testing.assert_array_equal(ds.logits_cal, z[:20])
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.savez(
        tmp_path / "b.npz",
        probs_cal=probs[:20],
        y_cal=y[:20].astype(float),
        probs_test=probs[20:],
        y_test=y[20:, None],
    )
    ds = load_dataset("npz", path=tmp_path / "b.npz", name="mine")
    assert ds.name == "mine" and not ds.is_logits
    np.testing.assert_allclose(ds.probs_test, probs[20:], atol=1e-12)


def test_kull_pickle(tmp_path, rng):
    z = rng.normal(size=(30, 10)).astype(np.float32)
    y = rng.integers(0, 10, (30, 1))
    path = tmp_path / "probs_densenet40_c10_logits.p"
    with open(path, "wb") as f:
        pickle.dump(((z[:10], y[:10]), (z[10:], y[10:])), f)
    ds = load_dataset("kull_pickle", path=path, trusted=True)
    assert ds.logits_cal.shape == (10, 10) and ds.y_test.shape == (20,)
    assert ds.name == "probs_densenet40_c10_logits"


def _save(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    "arrays,message",
    [
        (
            {"logits_cal": np.zeros(5), "y_cal": np.zeros(5, int)},
            "shape \\(n_samples, n_classes\\)",
        ),
        ({"logits_cal": np.full((5, 3), np.nan)}, "NaN or infinite"),
        (
            {"logits_cal": np.zeros((5, 3)), "y_cal": np.array([0, 1, 2, 3, 0])},
            "labels outside 0..2",
        ),
        ({"y_cal": np.zeros(4, int)}, "4 labels but the scores have 5 rows"),
        ({"logits_test": np.zeros((5, 4))}, "3 classes but logits_test has 4"),
        ({"y_cal": np.array([0.5, 1, 2, 0, 1])}, "integer class labels"),
    ],
)
def test_bad_npz_names_field_and_fix(tmp_path, arrays, message):
    base = {
        "logits_cal": np.zeros((5, 3)),
        "y_cal": np.arange(5) % 3,
        "logits_test": np.zeros((5, 3)),
        "y_test": np.arange(5) % 3,
    }
    base.update(arrays)
    path = _save(tmp_path / "bad.npz", **base)
    with pytest.raises(CalbenchError, match=message) as err:
        load_dataset("npz", path=path)
    assert "bad.npz" in str(err.value)


def test_probabilities_that_do_not_sum_to_one(tmp_path):
    p = np.full((4, 2), 0.4)
    path = _save(
        tmp_path / "p.npz", probs_cal=p, y_cal=[0, 1, 0, 1], probs_test=p, y_test=[0, 1, 0, 1]
    )
    with pytest.raises(CalbenchError, match="probs_cal must sum to 1.*sums to 0.8.*Renormalise"):
        load_dataset("npz", path=path)


def test_missing_unreadable_and_mislabelled_files(tmp_path):
    with pytest.raises(CalbenchError, match="does not exist"):
        load_dataset("npz", path=tmp_path / "nope.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(CalbenchError, match="junk.npz' is not an npz file"):
        load_dataset("npz", path=tmp_path / "junk.npz")
    np.save(tmp_path / "one.npy", np.zeros((2, 2)))
    with pytest.raises(CalbenchError, match="one.npy' is a .npy file .* np.savez"):
        load_dataset("npz", path=tmp_path / "one.npy")
    np.savez(tmp_path / "objects.npz", y=np.array([[1], [2, 3]], dtype=object))
    with pytest.raises(CalbenchError, match="holds Python objects .* never unpickles"):
        load_dataset("npz", path=tmp_path / "objects.npz")
    (tmp_path / "cut.npz").write_bytes(
        _save(tmp_path / "whole.npz", y=np.arange(9)).read_bytes()[:60]
    )
    with pytest.raises(CalbenchError, match="cut.npz' is a damaged npz file"):
        load_dataset("npz", path=tmp_path / "cut.npz")
    path = _save(tmp_path / "keys.npz", scores=np.zeros((2, 2)))
    with pytest.raises(CalbenchError, match="has keys \\['scores'\\]; calbench reads"):
        load_dataset("npz", path=path)
    (tmp_path / "x.p").write_bytes(b"garbage")
    with pytest.raises(CalbenchError, match="Cannot read .* as a pickle"):
        load_dataset("kull_pickle", path=tmp_path / "x.p", trusted=True)
    with pytest.raises(CalbenchError, match="Unknown dataset loader"):
        load_dataset("cifar")
    with pytest.raises(CalbenchError, match="takes no option"):
        load_dataset("synthetic_dirichlet", n=5)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: {**a, "logits_cal": a["logits_cal"] + 1j}, "holds complex numbers"),
        (lambda a: {**a, "y_cal": np.eye(3)[a["y_cal"]]}, "one-hot encoded"),
        (lambda a: {**a, "y_cal": np.zeros_like(a["y_cal"])}, "every calibration label is"),
        (
            lambda a: {**a, "logits_cal": a["logits_cal"][:2], "y_cal": a["y_cal"][:2]},
            "2 calibration rows for 3 classes",
        ),
    ],
    ids=["complex", "one_hot", "one_class", "fewer_rows_than_classes"],
)
def test_scores_no_calibrator_can_use_are_refused_by_name(tmp_path, change, message):
    rng = np.random.default_rng(0)
    arrays = {
        "logits_cal": rng.normal(size=(30, 3)),
        "y_cal": np.arange(30) % 3,
        "logits_test": rng.normal(size=(30, 3)),
        "y_test": np.arange(30) % 3,
    }
    path = _save(tmp_path / "bad.npz", **change(arrays))
    with pytest.raises(CalbenchError, match=message):
        load_dataset("npz", path=path)


def test_a_class_absent_from_calibration_is_warned_and_flagged_in_the_rows(tmp_path):
    from calbench.runner.cell import run_cell
    from tests.runner.test_runner import plan

    rng = np.random.default_rng(0)
    y_cal = np.arange(300) % 3
    arrays = {
        "logits_cal": rng.normal(size=(300, 4)),
        "y_cal": y_cal,  # class 3 never occurs
        "logits_test": rng.normal(size=(300, 4)),
        "y_test": np.arange(300) % 4,
    }
    path = _save(tmp_path / "three_of_four.npz", **arrays)
    with pytest.warns(UserWarning, match=r"1 of 4 classes never occur in y_cal \(3\)"):
        rows = run_cell(plan("dataset=npz", f"dataset.path={path}", f"results_dir={tmp_path}"))
    flag = rows.loc[rows["metric"] == "calibration_classes_missing", "value"]
    assert flag.tolist() == [1.0]


def test_a_binary_task_may_give_class_1s_score_alone(tmp_path, rng):
    """One set of class-1 probabilities (a vector, as CalArena's binary files store them) or
    log-odds: two classes, class 0 the complement."""
    from calbench.data import load_dataset

    p = rng.uniform(0.01, 0.99, 400)
    y = (rng.random(400) < p).astype(int)
    np.savez(tmp_path / "probs.npz", probs=p, y=y)
    data = load_dataset("npz", path=tmp_path / "probs.npz")
    assert data.n_classes == 2
    both = np.concatenate([data.probs_cal, data.probs_test])
    np.testing.assert_allclose(np.sort(both[:, 1]), np.sort(p), rtol=1e-12)
    np.testing.assert_allclose(both.sum(axis=1), 1.0)
    s = np.log(p / (1 - p))
    np.savez(tmp_path / "logits.npz", logits_cal=s, y_cal=y, logits_test=s, y_test=y)
    data = load_dataset("npz", path=tmp_path / "logits.npz")
    np.testing.assert_allclose(data.probs_test[:, 1], p, rtol=1e-12)


def test_a_vector_of_scores_with_labels_of_more_classes_says_so(tmp_path, rng):
    """Read as a binary task's class-1 scores, its 3-class labels were refused as "labels
    outside 0..1 ... the 2 score columns", columns the file never had."""
    s, y = rng.normal(size=300), rng.integers(0, 3, 300)
    np.savez(tmp_path / "one.npz", logits_cal=s, y_cal=y, logits_test=s, y_test=y)
    with pytest.raises(
        CalbenchError, match=r"one.npz: logits_cal is a vector .* labels go up to 2"
    ):
        load_dataset("npz", path=tmp_path / "one.npz")
    np.savez(tmp_path / "set.npz", probs=rng.uniform(size=300), y=y)
    with pytest.raises(CalbenchError, match=r"set.npz: probs is a vector .* one column per class"):
        load_dataset("npz", path=tmp_path / "set.npz")


def test_a_configured_data_set_made_binary():
    """``dataset.binary`` (the binary presets' two-class tasks): class 1 the named classes,
    its probability their total."""
    from calbench.data import load_dataset
    from calbench.runner.plan import load_configured_dataset

    config = {"loader": "synthetic_dirichlet", "seed": 0, "n_cal": 300, "n_test": 400}
    plain = load_dataset("synthetic_dirichlet", seed=0, n_cal=300, n_test=400)
    binary = load_configured_dataset({**config, "binary": {"positive": [0, 2]}})
    assert binary.n_classes == 2 and binary.true_map is None
    np.testing.assert_allclose(
        binary.probs_test[:, 1], plain.probs_test[:, [0, 2]].sum(axis=1), rtol=1e-12
    )
    np.testing.assert_array_equal(binary.y_test, np.isin(plain.y_test, [0, 2]))


def test_a_feature_set_made_binary_before_its_classifier_is_trained():
    """``dataset.binary`` on a UCI feature set (the binary_uci preset): the labels regrouped
    before any model is trained, ``half`` taking the first half of the classes."""
    from calbench.data.tabular import load_keel
    from calbench.runner.plan import load_configured_dataset

    config = {"loader": "tabular", "source": "vowel", "classifier": {"name": "logistic"}}
    binary = load_configured_dataset({**config, "binary": {"positive": "half"}})
    features, y, names = load_keel("vowel")
    assert binary.n_classes == 2 and len(names) == 11
    np.testing.assert_array_equal(binary.y, np.isin(y, [0, 1, 2, 3, 4]))
    np.testing.assert_array_equal(binary.features, features)
    assert binary.class_names == ["+".join(names[5:]), "+".join(names[:5])]
    with pytest.raises(CalbenchError, match="a list of classes or half; got 'most'"):
        load_configured_dataset({**config, "binary": {"positive": "most"}})
    with pytest.raises(CalbenchError, match="some but not all of the classes 0..10"):
        load_configured_dataset({**config, "binary": {"positive": list(range(11))}})
