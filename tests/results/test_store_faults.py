"""Every file of a store guarded: each one damaged or removed is found by `store verify`
and named by every reader, never read as numbers; the data-name index rebuilt from the
cells' configs; faults of the folder (a full disk, a file where a folder belongs) one line
that blames the folder, not a method; names too long for files refused at `run`; HDF5
layouts calbench does not read, and files of two schemas, refused by name."""

import errno
import re
import shutil

import h5py
import numpy as np
import pytest

from calbench.data.identity import user_files_name
from calbench.results.store import DamagedCells, ResultStore
from calbench.results.verify import repair, verify
from calbench.runner.job import run_job
from tests.cli.test_cli import calbench
from tests.runner.test_runner import plan

SMALL = ["dataset.n_cal=600", "dataset.n_test=900"]


def _npz(path, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, 900)
    z = rng.normal(size=(900, 3))
    z[np.arange(900), y] += 1.5
    np.savez(path, logits=z, y=y)
    return path


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A store of two generated cells and one of the user's file."""
    results = tmp_path_factory.mktemp("guarded")
    for method in ("ts", "vs"):
        run_job(plan(*SMALL, f"method={method}", f"results_dir={results}"))
    own = _npz(results / "mine.npz", 0)
    run_job(plan("dataset=npz", f"dataset.path={own}", "method=ts", f"results_dir={results}"))
    return results


@pytest.fixture
def store(clean, tmp_path):
    shutil.copytree(clean / "store", tmp_path / "store")
    shutil.copy(clean / "mine.npz", tmp_path / "mine.npz")
    return tmp_path


def _cell(results, method="ts"):
    rows = ResultStore(results).read()
    rows = rows[(rows["method"] == method) & (rows["dataset"] == "synthetic_dirichlet")]
    return results / "store" / rows["config_hash"].iat[0]


def _cut(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {
    "rows cut": (lambda c: _cut(c.with_suffix(".csv")), ".csv", "cut short"),
    "rows removed": None,  # a cell without rows is no cell: nothing to find
    "config cut": (lambda c: _cut(c.with_suffix(".yaml")), ".yaml", "not the one its rows name"),
    "config removed": (lambda c: c.with_suffix(".yaml").unlink(), ".yaml", "config is missing"),
    "config emptied": (lambda c: c.with_suffix(".yaml").write_text(""), ".yaml", "config"),
    "predictions cut": (lambda c: _cut(c.with_suffix(".npz")), ".npz", "npz"),
    "predictions removed": (lambda c: c.with_suffix(".npz").unlink(), ".npz", "missing"),
}


@pytest.mark.parametrize("case", [k for k, v in DAMAGE.items() if v])
def test_each_file_of_a_cell_damaged_or_removed_is_found_and_repaired(store, case):
    damage, suffix, reason = DAMAGE[case]
    cell = _cell(store)
    damage(cell)
    problems, _ = verify(store)
    assert [(p.path.name, p.cell) for p in problems] == [(cell.name + suffix, cell.name)]
    assert reason in problems[0].reason
    if suffix != ".npz":  # the rows and configs are read by every reader; predictions by some
        with pytest.raises(DamagedCells, match=cell.name):
            ResultStore(store).read()
    repair(store, problems)
    assert verify(store)[0] == []
    assert cell.name not in set(ResultStore(store).read()["config_hash"])


def test_shared_arrays_cut_are_found(store):
    arrays = sorted((store / "store" / "arrays").glob("*.npz"))[0]
    _cut(arrays)
    problems, _ = verify(store)
    assert arrays in [p.path for p in problems]  # and each cell whose predictions name it
    repair(store, problems)
    assert verify(store)[0] == [] and not arrays.exists()


def test_the_data_name_index_garbled_is_named_and_rebuilt(store):
    index = store / "store" / "data_names.tsv"
    index.write_bytes(b"\xff\xfe garbage\n")
    problems, _ = verify(store)
    assert [(p.path, p.reason) for p in problems] == [(index, "it is not text (damaged)")]
    other = _npz(store / "sub" / "mine.npz" if (store / "sub").mkdir() is None else None, 1)
    out = calbench("run", "dataset=npz", f"dataset.path={other}", f"results_dir={store}")
    assert out.returncode == 2 and "data_names.tsv: it is not text" in out.stderr
    assert "UnicodeDecodeError" not in out.stderr and "calibrator" not in out.stderr
    repair(store, problems)
    assert verify(store)[0] == []
    # Rebuilt from the configs: the other file of the same stem is still refused.
    out = calbench("run", "dataset=npz", f"dataset.path={other}", f"results_dir={store}")
    assert out.returncode == 2 and "already names" in out.stderr


def test_the_data_name_index_removed_is_rebuilt_by_the_next_run(store):
    """The index says what the configs say: gone, it is no damage, and the next run that
    needs it rebuilds it before it claims a name (before, a removed index let another
    file of the same stem join the data set's row)."""
    index = store / "store" / "data_names.tsv"
    before = index.read_text()
    index.unlink()
    assert verify(store)[0] == []
    (store / "sub").mkdir()
    other = _npz(store / "sub" / "mine.npz", 1)
    out = calbench("run", "dataset=npz", f"dataset.path={other}", f"results_dir={store}")
    assert out.returncode == 2 and "already names" in out.stderr  # not joined into one row
    assert index.read_text() == before


def test_a_line_of_the_index_cut_or_edited_is_found(store):
    index = store / "store" / "method_names.tsv"
    lines = index.read_text().splitlines(keepends=True)
    index.write_text("".join(lines[:-1]))  # cut at a line end: a cell's line missing
    problems, _ = verify(store)
    assert [p.path for p in problems] == [index] and "lacks the method names" in problems[0].reason
    repair(store, problems)
    assert index.read_text() == "".join(lines) or sorted(index.read_text().splitlines()) == sorted(
        line.rstrip("\n") for line in lines
    )


def test_a_method_name_taken_by_another_calibrator_is_refused(store):
    # (a library method's own name is refused before any run: `check_method_name`)
    first = calbench("run", *SMALL, "method=vs", "method.name=mine", f"results_dir={store}")
    assert first.returncode == 0, first.stderr
    out = calbench("run", *SMALL, "method=uncal", "method.name=mine", f"results_dir={store}")
    assert out.returncode == 2 and "'default' already names vs; uncal is another method" in (
        out.stderr
    )
    assert "method.name=mine_2" in out.stderr


def test_a_line_of_the_data_index_edited_is_found(store):
    index = store / "store" / "data_names.tsv"
    index.write_text(index.read_text().replace("mine", "yours"))
    assert "does not match its checksum" in verify(store)[0][0].reason


def test_rescore_refuses_a_store_with_a_cut_config_and_changes_nothing(store):
    cell = _cell(store, "vs")
    _cut(cell.with_suffix(".yaml"))
    before = {p.name: p.read_bytes() for p in (store / "store").glob("*.*")}
    out = calbench("rescore", "--metrics", "mce", "--results-dir", str(store))
    assert out.returncode == 2 and f"{cell.name}.yaml: its config" in out.stderr
    assert {p.name: p.read_bytes() for p in (store / "store").glob("*.*")} == before


def test_a_stray_csv_is_named_but_no_reader_refuses_the_store(store):
    stray = store / "store" / "my_notes.csv"
    stray.write_text("a,b\n1,2\n")
    assert len(ResultStore(store).read()) > 0
    problems, _ = verify(store)
    assert [(p.path, p.cell) for p in problems] == [(stray, None)]
    assert any("stray" in line for line in repair(store, problems))
    assert not stray.exists() and verify(store)[0] == []


def test_a_file_where_the_damaged_folder_belongs_is_one_line(store):
    (store / "store" / "damaged").write_text("not a folder")
    _cut(_cell(store).with_suffix(".csv"))
    out = calbench("store", "verify", "--repair", "--results-dir", str(store))
    assert out.returncode == 2 and "damaged is a file where calbench keeps" in out.stderr
    out = calbench("run", *SMALL, "method=ts", f"results_dir={store}")
    assert out.returncode == 2 and "damaged is a file where calbench keeps" in out.stderr
    assert "calibrator" not in out.stderr and "Traceback" not in out.stderr


def test_a_full_disk_during_tables_is_one_line(store, monkeypatch, capsys):
    import calbench.tables.write as write
    from calbench.cli import main

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(write, "atomic_write_text", full)
    with pytest.raises(SystemExit) as stop:
        main(["tables", "--results-dir", str(store)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the disk is full; free space and run again" in err[0]


@pytest.mark.parametrize(
    "override, message",
    [
        (f"experiment_name={'e' * 300}", "experiment_name='eeee"),
        (f"method.name={'m' * 101}", "is 101 characters long; at most 100"),
        ("dataset.name=..", "dataset.name='..' cannot name files"),
    ],
)
def test_names_too_long_or_no_file_can_carry_are_refused_at_run(tmp_path, override, message):
    out = calbench("run", override, f"results_dir={tmp_path}")
    assert out.returncode == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_file_stem_too_long_for_a_name_is_refused_with_the_fix(tmp_path):
    path = _npz(tmp_path / f"{'s' * 240}.npz", 0)
    out = calbench("run", "dataset=npz", f"dataset.path={path}", f"results_dir={tmp_path}")
    assert out.returncode == 2 and "the data set name taken from the file's stem" in out.stderr
    assert "dataset.name=my_model" in out.stderr
    assert user_files_name({"loader": "npz", "path": str(path)}) == "s" * 240


def test_an_npz_with_both_schemas_or_one_test_row_is_refused(tmp_path):
    from calbench.data.loaders import load_npz
    from calbench.errors import CalbenchError

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    z = rng.normal(size=(300, 3))
    np.savez(tmp_path / "both.npz", logits=z, y=y, logits_cal=z, y_cal=y, logits_test=z, y_test=y)
    with pytest.raises(CalbenchError, match="holds both one set"):
        load_npz(tmp_path / "both.npz")
    np.savez(tmp_path / "one.npz", logits_cal=z, y_cal=y, logits_test=z[:1], y_test=y[:1])
    with pytest.raises(CalbenchError, match=re.escape("1 test row(s)")):
        load_npz(tmp_path / "one.npz")


def _h5(path, tasks):
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for name, arrays in tasks.items():
            group = f.create_group(name)
            for a in arrays:
                if a == "probas_cal!group":
                    group.create_group("probas_cal")
                    continue
                n = 200 if a.endswith("cal") else 100
                if a.startswith("probas"):
                    group[a] = rng.dirichlet(np.ones(3), n)
                else:
                    group[a] = rng.integers(0, 3, n)
    return path


FULL = ("probas_cal", "labels_cal", "probas_test", "labels_test")


@pytest.mark.parametrize(
    "tasks, message",
    [
        ({"a/m": FULL, "b/m": ("probas_cal!group", *FULL[1:])}, "'b/m': probas_cal is a group"),
        ({"a/m": FULL, "b/m": FULL[:3]}, "'b/m': arrays ['labels_test'] are missing"),
        ({"a/m": FULL, "b,c/m": FULL}, "task 'b,c/m': a task's name"),
        ({"a/m": FULL, "it's/m": FULL}, "task \"it's/m\": a task's name"),
    ],
    ids=["group_for_array", "missing_array", "comma", "quote"],
)
def test_hdf5_layouts_calbench_does_not_read_are_named(tmp_path, tasks, message):
    """`dataset.task=all` lists a file's tasks (`calbench.data.hdf5.tasks`) before a sweep
    starts: a layout it cannot read stops it there, named."""
    from calbench.data.hdf5 import tasks as file_tasks
    from calbench.errors import CalbenchError

    path = _h5(tmp_path / "bench.h5", tasks)
    with pytest.raises(CalbenchError, match=re.escape(message)):
        file_tasks(path)


def test_a_sweep_over_every_task_of_a_damaged_file_is_one_line(tmp_path):
    path = _h5(tmp_path / "bench.h5", {"a/m": FULL, "b/m": FULL[:3]})
    out = calbench(
        "run", "-m", "dataset=hdf5", f"dataset.path={path}", "dataset.task=all",
        f"results_dir={tmp_path}",
    )  # fmt: skip
    assert out.returncode != 0 and "arrays ['labels_test'] are missing" in out.stderr
    assert "Traceback" not in out.stderr
