"""A benchmark's published results as a store: CalArena's files read into experiments whose
leaderboard gives CalArena's own win rates, and its improvement table."""

import re

import numpy as np
import pandas as pd
import pytest

from calbench.errors import CalbenchError
from calbench.papers.calarena2026.importer import experiment_name, import_calarena, method_name
from calbench.results.store import ResultStore
from calbench.stats.arena import improvement_over_uncalibrated
from calbench.tables.leaderboard import leaderboard

#: Brier of four methods on five tasks of two data sets (one tie: A and B on task 4).
BRIER = {
    "Base-model": [0.30, 0.40, 0.20, 0.10, 0.50],
    "TS": [0.25, 0.41, 0.18, 0.09, 0.45],
    "SMS": [0.24, 0.39, 0.19, 0.09, 0.44],
    "Isotonic": [0.26, 0.38, 0.21, 0.11, 0.46],
}
TASKS = [
    ("iris", "CatBoost"),
    ("iris", "LightGBM"),
    ("wine", "CatBoost"),
    ("wine", "KNN"),
    ("wine", "XGB"),
]


def write_calarena(root, brier=BRIER, collection="tabrepo-multiclass"):
    folder = root / "results" / collection
    folder.mkdir(parents=True)
    for method, values in brier.items():
        frame = pd.DataFrame(
            {
                "dataset": [d for d, _ in TASKS],
                "model": [m for _, m in TASKS],
                "cal_size": 100,
                "test_size": 100,
                "n_classes": 3,
                f"{method}_brier": values,
                f"{method}_logloss": np.asarray(values) * 3,
                f"{method}_ece-15": np.asarray(values) / 10,
                f"{method}_accuracy": 1 - np.asarray(values),
                f"{method}_time": 0.5,
            }
        )
        frame.to_csv(folder / f"{method}.csv", index=False)
    return root


def calarena_win_rates(brier: dict) -> dict:
    """CalArena's definition, written out: on a task, a method's win rate is the share of
    the other methods whose value is strictly worse (greater); averaged over tasks."""
    methods = list(brier)
    n_tasks = len(next(iter(brier.values())))
    rates = {}
    for m in methods:
        per_task = [
            sum(brier[o][t] > brier[m][t] for o in methods if o != m) / (len(methods) - 1)
            for t in range(n_tasks)
        ]
        rates[m] = sum(per_task) / n_tasks
    return rates


def test_the_imported_leaderboard_gives_calarenas_win_rates(tmp_path):
    write_calarena(tmp_path / "source")
    summary = import_calarena(tmp_path / "source", tmp_path / "results")
    assert summary == {"calarena_published_tabrepo_multiclass": (5, 4)}
    board = leaderboard(tmp_path / "results", "calarena_published_tabrepo_multiclass", "brier")
    expected = calarena_win_rates(BRIER)
    for method, rate in expected.items():
        assert board.table.loc[method_name(method), "win_rate"] == pytest.approx(rate, abs=1e-15)
    # Hand-checked: SMS beats all three on tasks 0 and 4 and two on tasks 1 to 3 (its tie
    # with TS on task 3 is no win): (3 + 2 + 2 + 2 + 3) / 3 / 5.
    assert expected["SMS"] == pytest.approx(12 / 15)
    # The blocks the intervals resample are the data sets, as CalArena's bootstrap.
    assert sorted(set(board.blocks)) == ["iris", "wine"]
    assert not board.paired  # published results carry no predictions to pair


def test_importing_again_changes_nothing_and_an_edited_file_replaces_its_cell(tmp_path):
    source = write_calarena(tmp_path / "source")
    import_calarena(source, tmp_path / "results")
    before = sorted(p.name for p in (tmp_path / "results" / "store").glob("*.csv"))
    import_calarena(source, tmp_path / "results")
    assert sorted(p.name for p in (tmp_path / "results" / "store").glob("*.csv")) == before
    edited = dict(BRIER, SMS=[0.9] * 5)
    (source / "results" / "tabrepo-multiclass" / "SMS.csv").unlink()
    write_calarena(tmp_path / "other", edited)
    (tmp_path / "other" / "results" / "tabrepo-multiclass" / "SMS.csv").rename(
        source / "results" / "tabrepo-multiclass" / "SMS.csv"
    )
    import_calarena(source, tmp_path / "results")
    board = leaderboard(tmp_path / "results", "calarena_published_tabrepo_multiclass", "brier")
    assert board.table.loc["sms", "win_rate"] == pytest.approx(0.0)
    # The file's numbers, not a mean of its old and new ones: one SMS cell is left.
    stored = ResultStore(tmp_path / "results").read()
    sms = stored[(stored["method"] == "sms") & (stored["metric"] == "brier")]
    assert sms["config_hash"].nunique() == 1 and (sms["value"] == 0.9).all()
    assert len(list((tmp_path / "results" / "store").glob("*.csv"))) == len(before)


def _store_files(results) -> dict:
    return {p.name: p.read_bytes() for p in sorted((results / "store").glob("*"))}


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda t: t.replace("\n", ",1\n", 2).replace(",1\n", "\n", 1), "line 2 has 11 fields"),
        (lambda t: "", "the file is empty"),
        (lambda t: t.replace("0.25,", "abc,", 1), "line 2: TS_brier = 'abc' is not a number"),
        (lambda t: t[: t.rindex(",") + 3], "its last line has no line end"),
        (lambda t: t.rsplit(",", 3)[0] + "\n", "line 6 has 7 fields where the header has 10"),
        (lambda t: t + t.splitlines()[2] + "\n", "task iris / LightGBM is listed more than once"),
        (lambda t: t.replace(",0.5\n", ",\n", 1), "line 2: TS_time = '' is not a number"),
    ],
    ids=[
        "extra_field",
        "empty",
        "not_a_number",
        "cut_mid_line",
        "cut_row",
        "task_twice",
        "no_time",
    ],
)
def test_a_damaged_file_stores_nothing_and_is_named_with_its_line(tmp_path, damage, message):
    """Every file of the folder is checked before anything is stored: the store is left
    as it was (here: holding an earlier import), byte for byte."""
    source = write_calarena(tmp_path / "source")
    import_calarena(source, tmp_path / "results")
    before = _store_files(tmp_path / "results")
    ts = source / "results" / "tabrepo-multiclass" / "TS.csv"
    sms = source / "results" / "tabrepo-multiclass" / "SMS.csv"
    sms.write_text(sms.read_text().replace("0.24", "0.2"))  # a change that would land
    ts.write_text(damage(ts.read_text()))
    with pytest.raises(CalbenchError, match=re.escape(message)) as error:
        import_calarena(source, tmp_path / "results")
    assert str(ts) in str(error.value) and "nothing was imported" in str(error.value)
    assert _store_files(tmp_path / "results") == before


def test_a_collection_without_files_or_with_a_bad_name_is_refused(tmp_path):
    source = write_calarena(tmp_path / "source")
    (source / "results" / "empty-collection").mkdir()
    with pytest.raises(CalbenchError, match="empty-collection holds no result files"):
        import_calarena(source, tmp_path / "results")
    assert not (tmp_path / "results" / "store").exists()
    (source / "results" / "empty-collection").rmdir()
    write_calarena(source, collection="bad name (copy)")
    with pytest.raises(
        CalbenchError, match=re.escape("CalArena collection folder 'bad name (copy)'")
    ):
        import_calarena(source, tmp_path / "results")
    assert not (tmp_path / "results" / "store").exists()


def test_a_folder_without_calarena_results_is_named(tmp_path):
    with pytest.raises(CalbenchError, match="holds no CalArena results"):
        import_calarena(tmp_path, tmp_path / "results")
    bad = tmp_path / "bad" / "results" / "cv-multiclass"
    bad.mkdir(parents=True)
    (bad / "TS.csv").write_text("a,b\n1,2\n")
    with pytest.raises(CalbenchError, match="TS.csv is not a CalArena result file"):
        import_calarena(tmp_path / "bad", tmp_path / "results")


def test_the_improvement_table_is_calarenas():
    """Mean of 100 x (uncal - method) over tasks; margin 1.96 sd / sqrt(number of data
    sets), as CalArena's compute_absolute_improvements."""
    values = pd.DataFrame(BRIER).rename(columns=method_name)
    blocks = [d for d, _ in TASKS]
    table = improvement_over_uncalibrated(values, blocks, higher_is_better=False)
    gains = 100 * (np.asarray(BRIER["Base-model"]) - np.asarray(BRIER["SMS"]))
    assert table.loc["sms", "improvement"] == pytest.approx(gains.mean())
    assert table.loc["sms", "calarena_margin"] == pytest.approx(
        1.96 * gains.std(ddof=1) / np.sqrt(2)
    )
    assert table.index[0] == "sms" and table.loc["sms", "rank"] == 1
    assert table.loc["sms", "low"] <= table.loc["sms", "improvement"] <= table.loc["sms", "high"]


def test_experiment_and_method_names():
    assert experiment_name("tabrepo-multiclass") == "calarena_published_tabrepo_multiclass"
    assert [method_name(m) for m in ("Base-model", "TS", "Venn-Abers", "SMS")] == [
        "uncal",
        "ts",
        "venn_abers",
        "sms",
    ]


def test_leaderboards_by_a_task_property_rank_each_group_alone(tmp_path):
    """Grouped by classifier, each group's win rates are CalArena's definition on that
    group's tasks alone."""
    from calbench.tables.groups import leaderboards_by

    write_calarena(tmp_path / "source")
    import_calarena(tmp_path / "source", tmp_path / "results")
    boards = dict(
        leaderboards_by(
            tmp_path / "results", "calarena_published_tabrepo_multiclass", "brier", "classifier"
        )
    )
    assert sorted(boards) == ["CatBoost", "KNN", "LightGBM", "XGB"]
    catboost = [i for i, (_, m) in enumerate(TASKS) if m == "CatBoost"]
    expected = calarena_win_rates({k: [v[i] for i in catboost] for k, v in BRIER.items()})
    for method, rate in expected.items():
        assert boards["CatBoost"].table.loc[method_name(method), "win_rate"] == pytest.approx(rate)
    by_size = leaderboards_by(
        tmp_path / "results", "calarena_published_tabrepo_multiclass", "brier", "n_classes"
    )
    assert [label for label, _ in by_size] == ["n_classes = 3"]


def test_collections_pool_into_one_leaderboard_and_calarenas_mean_of_them(tmp_path):
    """Two collections pooled: the win rates are the definition over all their tasks on the
    methods both ran, a task met in both is kept twice, and the last column is CalArena's
    ranking across collections, the mean of each collection's own win rates."""
    other = {m: v for m, v in BRIER.items() if m != "Isotonic"}
    other["TS"] = [0.20, 0.45, 0.18, 0.12, 0.40]
    write_calarena(tmp_path / "source")
    write_calarena(tmp_path / "source", other, collection="tabarena-multiclass")
    import_calarena(tmp_path / "source", tmp_path / "results")
    names = "calarena_published_tabrepo_multiclass,calarena_published_tabarena_multiclass"
    board = leaderboard(tmp_path / "results", names, "brier")
    assert len(board.values) == 10 and sorted(board.table.index) == ["sms", "ts", "uncal"]
    common = {m: BRIER[m] + other[m] for m in other}
    pooled = calarena_win_rates(common)
    for method, rate in pooled.items():
        assert board.table.loc[method_name(method), "win_rate"] == pytest.approx(rate)
    first = calarena_win_rates({m: BRIER[m] for m in other})
    second = calarena_win_rates(other)
    for method in other:
        mean = (first[method] + second[method]) / 2
        assert board.table.loc[method_name(method), "mean_win_rate_over_experiments"] == (
            pytest.approx(mean)
        )
    assert sorted(set(board.blocks)) == ["iris", "wine"]  # data sets, across collections
