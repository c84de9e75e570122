"""CalArena's seven collections one command away: each HDF5 file registered with its source,
``dataset.task=all`` running every task present, the ``arena_*`` presets naming tasks as
CalArena's results do, and their leaderboard beside the imported published numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from calbench.data.hdf5 import expand_all_tasks
from calbench.data.registry import registered_sets
from calbench.errors import CalbenchError
from calbench.papers.calarena2026.importer import import_calarena
from calbench.results.experiment import Results
from calbench.results.store import ResultStore
from calbench.tables.leaderboard import leaderboard

h5py = pytest.importorskip("h5py")

COLLECTIONS = [
    "cv-binary",
    "cv-multiclass",
    "imagenet-multiclass",
    "tabarena-binary",
    "tabarena-multiclass",
    "tabrepo-binary",
    "tabrepo-multiclass",
]
HUB = "https://huggingface.co/datasets/probkit/CalArena/resolve/main/"


def test_each_collection_is_registered_with_its_hub_file_and_experiment_list():
    sets = registered_sets()
    for collection in COLLECTIONS:
        entry = sets["calarena_" + collection.replace("-", "_")]
        h5, listing = entry.files
        assert (h5.name, h5.urls) == (f"{collection}.h5", [HUB + f"{collection}.h5"])
        assert h5.sha256 is None  # the hub publishes it at download (X-Linked-Etag)
        assert listing.name == f"{collection}-experiments.csv" and len(listing.sha256) == 64
        assert entry.source["repository"] == "probkit/CalArena"


def test_the_experiment_lists_sums_are_the_published_ones():
    from conftest import SHARED_DATA

    sums_file = SHARED_DATA / "calarena_results" / "SHA256SUMS"
    if not sums_file.is_file():
        pytest.skip(f"{sums_file} is absent (a user's clone)")
    published = {
        line.split()[1].rsplit("/", 1)[-1]: line.split()[0]
        for line in sums_file.read_text().splitlines()
        if "-experiments.csv" in line
    }
    registered = {
        f.name: f.sha256
        for name, s in registered_sets().items()
        if name.startswith("calarena_")
        for f in s.files
        if f.name.endswith("-experiments.csv")
    }
    assert registered == published and len(registered) == 7


def _write_collection(path, tasks, rng):
    """A binary collection in CalArena's layout (class 1's float32 probability, shape (n,))."""
    with h5py.File(path, "w") as f:
        for task in tasks:
            group = f.create_group(task)
            for split, n in (("cal", 200), ("test", 300)):
                z = 2 * rng.normal(size=n)
                y = (rng.random(n) < 1 / (1 + np.exp(-1.4 * z))).astype(np.int32)
                group.create_dataset(f"probas_{split}", data=(1 / (1 + np.exp(-z))).astype("f4"))
                group.create_dataset(f"labels_{split}", data=y)


def test_all_tasks_expands_to_the_files_tasks_and_refuses_plainly(tmp_path):
    rng = np.random.default_rng(0)
    _write_collection(tmp_path / "cv-binary.h5", ["c10/densenet40", "breast/vit"], rng)
    config = OmegaConf.create(
        {"dataset": {"loader": "hdf5", "path": str(tmp_path / "cv-binary.h5")}}
    )
    expanded = expand_all_tasks(["method=ts,uncal", "dataset.task=all"], config)
    assert expanded == ["method=ts,uncal", "dataset.task=breast/vit,c10/densenet40"]
    assert expand_all_tasks(["dataset.task=breast/vit"], config) == ["dataset.task=breast/vit"]
    absent = OmegaConf.create(
        {"dataset": {"loader": "hdf5", "path": str(tmp_path / "cv-binary2.h5")}}
    )
    with pytest.raises(CalbenchError, match="does not exist"):
        expand_all_tasks(["dataset.task=all"], absent)
    registered = OmegaConf.create({"dataset": {"loader": "hdf5", "path": "/nowhere/cv-binary.h5"}})
    with pytest.raises(CalbenchError, match="calbench data fetch calarena_cv_binary"):
        expand_all_tasks(["dataset.task=all"], registered)
    with pytest.raises(CalbenchError, match="choose it with dataset=hdf5"):
        expand_all_tasks(["dataset.task=all"], OmegaConf.create({"dataset": {"loader": "npz"}}))


def _brier_two_classes(p1, y):
    """CalArena's binary Brier: summed over both classes, i.e. twice class 1's squared error."""
    return float(np.mean(2 * (p1.astype(np.float64) - y) ** 2))


@pytest.mark.slow  # 6 s: a whole arena preset; its importer and ranks have quick tests
def test_the_arena_preset_runs_every_task_and_ranks_beside_the_published(tmp_path):
    """``calbench run experiment=arena_cv_binary`` on a file of three tasks stores each as
    CalArena names it (data set / model); the published uncalibrated Brier, computed here from
    the file's arrays by the formula, equals calbench's to float32 rounding beside it."""
    from tests.cli.test_cli import calbench

    rng = np.random.default_rng(1)
    data, results = tmp_path / "data", tmp_path / "results"
    data.mkdir()
    tasks = ["c10/densenet40", "c10/lenet5", "breast/vit"]
    _write_collection(data / "cv-binary.h5", tasks, rng)
    done = calbench(
        "run",
        "experiment=arena_cv_binary",
        "method=uncal,ts",
        f"data_dir={data}",
        f"results_dir={results}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = Results(results).experiment_rows("arena_cv_binary")
    assert set(zip(rows["dataset"], rows["classifier"], strict=True)) == {
        ("c10", "densenet40"),
        ("c10", "lenet5"),
        ("breast", "vit"),
    }

    published = tmp_path / "published" / "results" / "cv-binary"
    published.mkdir(parents=True)
    with h5py.File(data / "cv-binary.h5") as f:
        brier = [
            _brier_two_classes(f[t]["probas_test"][()], f[t]["labels_test"][()]) for t in tasks
        ]
    for method, values in {"Base-model": brier, "TS": [b * 0.9 for b in brier]}.items():
        frame = pd.DataFrame({"dataset": [t.split("/")[0] for t in tasks]})
        frame["model"] = [t.split("/")[1] for t in tasks]
        frame["cal_size"], frame["test_size"] = 200, 300
        for metric in ("brier", "logloss", "ece-15", "accuracy", "kuiper", "time"):
            frame[f"{method}_{metric}"] = values
        frame.to_csv(published / f"{method}.csv", index=False)
    import_calarena(tmp_path / "published", results)

    board = leaderboard(results, "arena_cv_binary", "brier", beside="calarena_published_cv_binary")
    assert set(board.values.columns) == {"uncal", "ts", "uncal (published)", "ts (published)"}
    assert len(board.values) == 3 and sorted(set(board.blocks)) == ["breast", "c10"]
    gap = (board.values["uncal"] - board.values["uncal (published)"]).abs().max()
    assert gap < 1e-6
    assert not board.paired  # published results carry no predictions


def test_an_experiment_mixing_published_and_run_cells_is_refused(tmp_path):
    from tests.papers.calarena2026.test_importer import write_calarena

    results = tmp_path / "results"
    import_calarena(write_calarena(tmp_path / "src"), results)
    store = ResultStore(results)
    rows = Results(results).experiment_rows("calarena_published_tabrepo_multiclass")
    run = rows[rows["method"] == "ts"].assign(protocol="holdout", config_hash="0" * 16)
    store.write("0" * 16, run.drop(columns=["stored_at", "rows_sha256"], errors="ignore"))
    with pytest.raises(CalbenchError, match="holds both imported published results and"):
        Results(results).experiment_rows("calarena_published_tabrepo_multiclass")
