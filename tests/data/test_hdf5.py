"""CalArena's HDF5 benchmark layout read as it is: a small file written here in exactly
that layout (DATASET/MODEL groups of probas_cal, labels_cal, probas_test, labels_test)."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.data.hdf5 import load_hdf5, read_task, task_identity, tasks
from calbench.errors import CalbenchError

h5py = pytest.importorskip("h5py")


def _probs(rng, n, k):
    p = rng.dirichlet(np.ones(k), n).astype(np.float32)
    return p, rng.integers(0, k, n).astype(np.int32)


def _write_task(f, task, probas_cal, labels_cal, probas_test, labels_test, **options):
    group = f.create_group(task)
    for key, value in zip(
        ("probas_cal", "labels_cal", "probas_test", "labels_test"),
        (probas_cal, labels_cal, probas_test, labels_test),
        strict=True,
    ):
        group.create_dataset(key, data=value, **options)


@pytest.fixture
def bench_file(tmp_path):
    """Two multiclass tasks and two binary ones (one stored as (n,), one as (n, 2))."""
    rng = np.random.default_rng(0)
    path = tmp_path / "mini-multiclass.h5"
    truth = {}
    with h5py.File(path, "w") as f:
        for task, n, k in [("c10/netA", 60, 10), ("derma/vit", 40, 7)]:
            pc, yc = _probs(rng, n, k)
            pt, yt = _probs(rng, n + 10, k)
            _write_task(f, task, pc, yc, pt, yt, compression="gzip")
            truth[task] = (pc, yc, pt, yt)
        pc = rng.random(50).astype(np.float32)
        yc = (rng.random(50) < pc).astype(np.int32)
        _write_task(f, "adult/catboost", pc, yc, pc[:30], yc[:30])
        truth["adult/catboost"] = (pc, yc, pc[:30], yc[:30])
        two = np.column_stack([1 - pc, pc])
        _write_task(f, "bank/lgbm", two, yc, two[:20], yc[:20])
        truth["bank/lgbm"] = (pc, yc, pc[:20], yc[:20])
    return path, truth


def test_every_task_is_found_with_its_shape(bench_file):
    path, _ = bench_file
    found = {t.name: (t.n_classes, t.n_cal, t.n_test) for t in tasks(path)}
    assert found == {
        "adult/catboost": (2, 50, 30),
        "bank/lgbm": (2, 50, 20),
        "c10/netA": (10, 60, 70),
        "derma/vit": (7, 40, 50),
    }
    assert [t.name for t in tasks(path, min_classes=3)] == ["c10/netA", "derma/vit"]
    assert [t.name for t in tasks(path, datasets=["derma", "bank"])] == ["bank/lgbm", "derma/vit"]
    assert [t.name for t in tasks(path, max_rows=80)] == ["adult/catboost", "bank/lgbm"]


def test_arrays_come_back_equal(bench_file):
    path, truth = bench_file
    pc, yc, pt, yt = truth["c10/netA"]
    stored = read_task(path, "c10/netA")
    for key, value in zip(
        ("probas_cal", "labels_cal", "probas_test", "labels_test"), truth["c10/netA"], strict=True
    ):
        assert np.array_equal(stored[key], value) and stored[key].dtype == value.dtype
    data = load_hdf5(path, "c10/netA")  # as a Dataset: the rows renormalised in float64
    np.testing.assert_allclose(data.probs_cal, pc / pc.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(data.probs_test, pt / pt.sum(1, keepdims=True), rtol=1e-6)
    assert np.array_equal(data.y_cal, yc) and np.array_equal(data.y_test, yt)
    assert data.name == "mini-multiclass_c10_netA" and not data.is_logits


@pytest.mark.parametrize("task", ["adult/catboost", "bank/lgbm"])
def test_binary_tasks_run_as_two_classes(bench_file, task):
    path, truth = bench_file
    data = load_hdf5(path, task)
    pc, yc, _, _ = truth[task]
    assert data.n_classes == 2
    np.testing.assert_allclose(data.probs_cal[:, 1], pc, atol=1e-6)
    assert np.array_equal(data.y_cal, yc)


def test_identity_is_the_file_name_and_the_tasks_arrays(bench_file, tmp_path):
    path, _ = bench_file
    first = task_identity(path, "c10/netA")
    moved = tmp_path / "elsewhere" / path.name
    moved.parent.mkdir()
    moved.write_bytes(path.read_bytes())
    assert task_identity(moved, "c10/netA") == first  # another folder, the same cells
    assert task_identity(path, "derma/vit")["task_sha256"] != first["task_sha256"]
    with h5py.File(moved, "r+") as f:
        f["c10/netA/labels_test"][0] = (f["c10/netA/labels_test"][0] + 1) % 10
    assert task_identity(moved, "c10/netA")["task_sha256"] != first["task_sha256"]


def test_a_missing_task_or_file_gets_one_clear_error(bench_file, tmp_path):
    path, _ = bench_file
    with pytest.raises(CalbenchError, match="has no task 'c10/nope'.*c10/netA"):
        read_task(path, "c10/nope")
    with pytest.raises(CalbenchError, match="does not exist"):
        tasks(tmp_path / "absent.h5")


@pytest.mark.slow  # 14 s; the reader's tests stay quick
def test_a_sweep_over_a_files_tasks_and_its_cells_follow_the_file(bench_file, tmp_path):
    """``calbench data tasks`` gives the sweep value; the cells of a file moved to another
    folder are found in the store (hashed by the file's name and the task's arrays)."""
    from tests.cli.test_cli import calbench

    path, _ = bench_file

    def cli(*args):
        done = calbench(*args)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    names = cli("data", "tasks", str(path), "--min-classes", "3").strip()
    assert names == "c10/netA,derma/vit"
    results = tmp_path / "results"
    sweep = [
        "run",
        "-m",
        "dataset=hdf5",
        f"dataset.task={names}",
        "method=ts,cir",
        f"results_dir={results}",
        "hydra/launcher=basic",
    ]
    cli(*sweep, f"dataset.path={path}")
    stored = sorted(p.name for p in (results / "store").glob("*.csv"))
    assert len(stored) == 4
    moved = tmp_path / "moved" / path.name
    moved.parent.mkdir()
    moved.write_bytes(path.read_bytes())
    again = cli(*sweep, f"dataset.path={moved}")
    assert again.count("already in the store") == 4
    assert sorted(p.name for p in (results / "store").glob("*.csv")) == stored


def _bad_file(path, **replace):
    """One 3-class task, with ``replace`` swapping in an array (or a callable that writes
    it: an external link)."""
    rng = np.random.default_rng(1)
    pc, yc = _probs(rng, 30, 3)
    pt, yt = _probs(rng, 30, 3)
    arrays = {"probas_cal": pc, "labels_cal": yc, "probas_test": pt, "labels_test": yt}
    with h5py.File(path, "w") as f:
        group = f.create_group("d/m")
        for key, value in arrays.items():
            new = replace.get(key, value)
            if callable(new):
                new(group, key)
            else:
                group.create_dataset(key, data=new)
    return path


@pytest.mark.parametrize(
    "replace, message",
    [
        ({"labels_cal": np.arange(30) % 3 + 0.5}, "y_cal must hold integer class labels"),
        ({"labels_cal": np.eye(3)[np.arange(30) % 3]}, r"y_cal is one-hot encoded .*argmax"),
        ({"labels_test": np.array([b"cat"] * 30)}, "labels_test holds |S3 values"),
        (
            {"labels_cal": lambda g, k: g.__setitem__(k, h5py.ExternalLink("other.h5", "/y"))},
            "labels_cal is a link to another file",
        ),
        ({"labels_cal": np.zeros(30, dtype=int)}, "every calibration label is class 0"),
    ],
    ids=["fractional", "one_hot", "strings", "external_link", "one_class"],
)
def test_labels_no_calibrator_can_use_are_refused_by_name(tmp_path, replace, message):
    path = _bad_file(tmp_path / "bad.h5", **replace)
    with pytest.raises(CalbenchError, match=message):
        load_hdf5(path, "d/m")
