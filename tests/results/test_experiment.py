"""The results read once: one `calbench report E --html` parses and checks each stored rows
file and config once (it read every file five times: the experiment's rows, a leaderboard
per metric, the ranked tables over every experiment, the claims), and reads each cell's
predictions once."""

from collections import Counter

import pytest

import calbench.results.reading as reading_module
import calbench.results.store as store_module
from calbench.report.html import write_html_report
from calbench.results.experiment import Results
from calbench.runner.job import run_job
from tests.runner.test_runner import plan


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("once")
    for seed in (0, 1):
        for method in ("uncal", "ts", "vs"):
            run_job(
                plan(
                    "dataset.n_cal=600",
                    "dataset.n_test=900",
                    f"dataset.seed={seed}",
                    f"method={method}",
                    f"results_dir={folder}",
                )
            )
    return folder


def test_one_html_report_reads_each_stored_file_once(results, monkeypatch):
    rows_checked, configs_checked, predictions_read = Counter(), Counter(), Counter()
    damage, config_damage = store_module.damage, store_module.config_damage
    predictions = store_module.ResultStore.predictions

    def counted_damage(data, cell_hash, check_name=True):
        rows_checked[cell_hash] += 1
        return damage(data, cell_hash, check_name)

    def counted_config_damage(data):
        configs_checked[len(configs_checked)] += 1
        return config_damage(data)

    def counted_predictions(self, cell_hash, sha256):
        predictions_read[cell_hash] += 1
        return predictions(self, cell_hash, sha256)

    for module in (store_module, reading_module):  # the store's reads and its whole-table read
        monkeypatch.setattr(module, "damage", counted_damage)
        monkeypatch.setattr(module, "config_damage", counted_config_damage)
    monkeypatch.setattr(store_module.ResultStore, "predictions", counted_predictions)
    path = write_html_report("default", results)
    assert path.is_file()
    cells = {p.stem for p in (results / "store").glob("*.csv")}
    assert len(cells) == 6
    assert set(rows_checked) == cells and set(rows_checked.values()) == {1}
    # A config is checked with its cell's rows, and again where its options are read.
    assert sum(configs_checked.values()) <= 2 * len(cells)
    assert predictions_read and set(predictions_read.values()) == {1}


def test_results_give_what_the_store_reads(results):
    opened = Results(results)
    store = store_module.ResultStore(results)
    for latest in (True, False):
        assert opened.rows(latest=latest).equals(store.read(latest=latest))
    assert opened.rows("default").equals(store.read("default"))
    assert Results.of(opened) is opened
