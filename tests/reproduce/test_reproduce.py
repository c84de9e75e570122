"""The published numbers as data (transcription checked against the papers' own ranks and
average ranks), the paper-vs-calbench report, and the reproduction of the c10_densenet40
rows from Kull et al.'s published pickle."""

import functools
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from calbench.conf_files import group_files
from calbench.metrics import higher_is_better
from calbench.reproduce import comparison as report_module
from calbench.reproduce import spreads as spreads_module
from calbench.reproduce.comparison import compare
from calbench.reproduce.published import decimals_of, not_reproducible, published
from calbench.reproduce.rendering import summary
from calbench.reproduce.rules import Rule, rules

PUBLISHED = published(averages=True)


def _groups_with_ranks():
    ranked = PUBLISHED[PUBLISHED["rank"].notna()]
    return ranked.groupby(["source", "dataset", "metric"])


@pytest.mark.parametrize(
    "key", [k for k, _ in _groups_with_ranks()], ids=lambda k: f"{k[0]}:{k[1]}:{k[2]}"
)
def test_printed_ranks_follow_from_the_printed_values(key):
    """Each printed rank lies between 1 + (values strictly better) and (values at least as
    good): a mistyped value or column shifts a rank out of that range."""
    rows = _groups_with_ranks().get_group(key)
    sign = -1.0 if higher_is_better(rows["metric"].iloc[0], _paper_metrics()) else 1.0
    v = sign * rows["printed"].to_numpy()
    for value, rank, method in zip(v, rows["rank"], rows["method"], strict=True):
        best, worst = 1 + np.sum(v < value), np.sum(v <= value)
        assert best <= rank <= worst, f"{key} {method}: rank {rank} not in [{best}, {worst}]"


def _average_groups():
    averages = PUBLISHED[PUBLISHED["dataset"].str.startswith("average_rank")]
    return averages.groupby(["source", "dataset"])


@pytest.mark.parametrize("key", [k for k, _ in _average_groups()], ids=lambda k: f"{k[0]}:{k[1]}")
def test_printed_average_ranks_are_the_mean_of_the_printed_ranks(key):
    source, label = key
    averages = _average_groups().get_group(key)
    rows = PUBLISHED[(PUBLISHED["source"] == source) & PUBLISHED["rank"].notna()]
    if ":" in label:  # Valk's groups: C-10 / C-100
        prefix = {"C-10": "c10_", "C-100": "c100_"}[label.split(":")[1]]
        rows = rows[rows["dataset"].str.startswith(prefix)]
    means = rows.groupby("method")["rank"].mean()
    for method, printed in zip(averages["method"], averages["value"], strict=True):
        assert round(means[method], decimals_of(printed)) == pytest.approx(float(printed)), (
            f"{key} {method}: mean of printed ranks {means[method]:.3f}, printed {printed}"
        )


def test_kulls_uci_average_ranks_are_consistent():
    """Kull Tables 1-2: 7 methods ranked per task, so each classifier's average ranks sum to
    28 (up to the printed rounding), and the overall row is their mean (21 sets each)."""
    for source in ("kull2019_table1.csv", "kull2019_table2.csv"):
        rows = PUBLISHED[PUBLISHED["source"] == source]
        grid = rows.pivot(index="dataset", columns="method", values="printed")
        per_classifier = grid.drop(index="classifier:all")
        assert len(per_classifier) == 11 and grid.shape[1] == 7
        np.testing.assert_allclose(per_classifier.sum(axis=1), 28, atol=7 * 0.05 + 1e-9)
        # each printed row is off by at most 0.05, so their mean is too
        np.testing.assert_allclose(grid.loc["classifier:all"], per_classifier.mean(), atol=0.055)


def test_every_table_is_complete():
    counts = PUBLISHED[~PUBLISHED["dataset"].str.startswith("average_rank")].groupby("source")
    sizes = counts.size().to_dict()
    for table in ("table1", "table2", "table4", "table5", "table6"):
        assert sizes[f"gupta2021_{table}.csv"] == 13 * 6
    assert sizes["gupta2021_table7.csv"] == 3 * 2 * 5
    assert sizes["kull2019_table3.csv"] == sizes["kull2019_table4.csv"] == 14 * 6
    for t in range(5, 11):
        assert sizes[f"valk2022_table{t}.csv"] == 6 * 8
    for t in range(11, 17):
        assert sizes[f"valk2022_table{t}.csv"] == 3 * 7
    assert sizes["valk2022_table4.csv"] == 6 * 5


def _preset(name):
    from calbench.conf_files import read_group

    return read_group("experiment")[name]


@functools.lru_cache(maxsize=1)
def _paper_metrics() -> dict:
    """The output names of the paper presets' metric sets, with their options."""
    configs = {}
    for name in ("valk", "gupta", "kull_deepnet"):
        configs.update(_metrics_config(f"metrics={name}"))
    return configs


def _metrics_config(*overrides):
    """The metrics config Hydra composes for these overrides (e.g. ``metrics=valk``)."""
    from omegaconf import OmegaConf

    from tests.runner.test_runner import config

    return OmegaConf.to_container(config(*overrides).metrics, resolve=True)


@pytest.mark.parametrize("preset", sorted(published()["preset"].unique()))
def test_published_rows_name_cells_the_preset_produces(preset):
    """Every published number points at a method the preset sweeps and a metric its
    metrics config computes, so the report can always find the cell."""
    config = _preset(preset)
    methods = set(config["hydra"]["sweeper"]["params"]["method"].split(","))
    datasets = set(config["hydra"]["sweeper"]["params"]["dataset"].split(","))
    outputs = _metrics_config(f"experiment={preset}")
    rows = published(preset)
    assert set(rows["method"]) <= methods
    assert set(rows["metric"]) <= set(outputs)
    cells, ranked = rows[rows["spec"] == ""], rows[rows["spec"] != ""]
    assert set(cells["dataset"]) <= datasets
    from calbench.tables.write import table_specs

    for spec_name, part in ranked.groupby("spec"):  # average ranks: read from that table
        spec = table_specs()[spec_name]
        assert spec["experiment"] == preset and spec["metric"] == part["metric"].iloc[0]
        assert set(part["column"]) <= set(spec["columns"].values())


def test_paper_metric_definitions_in_the_presets():
    """The presets score with each paper's own definitions (see the metric docstrings)."""
    kull = _metrics_config("metrics=kull_deepnet")
    assert kull["classwise_ece"] == {"n_bins": 15, "binning": "digitize", "reduction": "sum"}
    assert kull["log_loss"] == {"clip": 1e-15}
    valk = _metrics_config("metrics=valk")
    assert valk["classwise_ece_size15"]["binning"] == "equal_size"
    assert valk["log_loss"] == {"clip": 1e-15}
    assert valk["average_loss_gap"]["draws"] == "valk"


def test_not_reproducible_tables_give_reasons():
    skipped = not_reproducible()
    assert {"Hoki", "Ho"} <= set(skipped["paper"])
    assert (skipped["reason"].str.len() > 40).all()


def _fake_store(monkeypatch, values):
    frame = pd.DataFrame(
        {"value": list(values.values()), "config_hash": [f"h{i}" for i in range(len(values))]},
        index=pd.MultiIndex.from_tuples(list(values)),
    )
    monkeypatch.setattr(report_module, "_calbench_values", lambda rows: frame)


def test_report_statuses_and_tolerance_rules(monkeypatch):
    # Gupta Table 1, c10_densenet40: uncal 5.493, TS 0.900, VS 0.890, spline 0.773 (x100).
    _fake_store(
        monkeypatch,
        {
            ("c10_densenet40", "uncal", "ks_error"): 0.0549308,  # rounds to 5.493
            ("c10_densenet40", "ts", "ks_error"): 0.0089949,  # 0.8995 -> 0.899: 1 unit off
            ("c10_densenet40", "vs", "ks_error"): 0.00999,
            ("c10_densenet40", "spline_gupta", "ks_error"): 0.00755,
        },
    )
    rule = Rule({"paper": "Gupta", "method": "spline_gupta"}, "float32 ties.", tolerance=0.1)
    monkeypatch.setattr(report_module, "rules", lambda: [rule])
    out = compare("gupta_ks").set_index(["table", "dataset", "method"])
    row = out.loc[("Table 1", "c10_densenet40", "uncal")]
    assert row["status"] == "equal" and row["calbench"] == "5.4931"
    assert out.loc[("Table 1", "c10_densenet40", "ts"), "status"] == "unexplained"
    assert out.loc[("Table 1", "c10_densenet40", "vs"), "note"] == "cause not yet known"
    assert out.loc[("Table 1", "c10_densenet40", "uncal"), "cells"] == "h0"
    spline = out.loc[("Table 1", "c10_densenet40", "spline_gupta")]
    assert spline["status"] == "within tolerance" and spline["note"] == "float32 ties."
    assert out.loc[("Table 1", "c10_resnet110", "uncal"), "status"] == "not run"
    lines = summary(out.reset_index())
    assert lines[0].startswith("2 of 4 published numbers reproduced (1 equal")
    assert lines[0].endswith(
        "2 differ: 0 with a cause verified by running the paper's procedure, 2 unexplained."
    )
    assert lines[1] == "Unexplained: Gupta Table 1: 2." and "not run" in lines[2]


def test_procedure_spreads_run_over_seeds_or_folds_and_keep_each_draws_newest_cell(tmp_path):
    """A procedure's cells differ in their seed, or (Rahimi et al.'s IOP) in the fold whose
    model predicts; a draw rerun counts once, by its newest cell."""
    import os

    from calbench.results.store import COLUMNS, ResultStore

    store = ResultStore(tmp_path)
    cells = [
        ("f1", "iop_proc", {"fold": 1}, 0.30),
        ("f2", "iop_proc", {"fold": 2}, 0.10),
        ("f2b", "iop_proc", {"fold": 2}, 0.20),  # fold 2 again, written later
        ("s7", "dec_proc", {"seed": 7}, 0.50),
        ("s8", "dec_proc", {"seed": 8}, 0.40),
        ("d", "knn_proc", {}, 0.60),
        ("t1", "forest_proc", {"temperature": True, "ts_stop": 1.0}, 0.25),
        ("t0", "forest_proc", {"temperature": True, "ts_stop": -1.0}, 0.24),
    ]
    for when, (name, method, params, value) in enumerate(cells):
        rows = pd.DataFrame({column: [""] for column in COLUMNS}).assign(
            experiment="p", dataset="c10", method=method, fold=0, metric="brier", value=value
        )
        path = store.write(
            name, rows, yaml.safe_dump({"method": {"name": method, "params": params}})
        )
        os.utime(path, (1e9 + when, 1e9 + when))
    methods = ["iop_proc", "dec_proc", "knn_proc", "forest_proc"]
    spreads = spreads_module.procedure_spreads(tmp_path, "p", methods)
    iop = spreads[("c10", "iop_proc", "brier")]
    assert (iop.values, iop.draws, iop.cells, iop.drawn) == (
        (0.3, 0.2),
        (1, 2),
        ("f1", "f2b"),
        "fold",
    )
    assert iop.describe(1, 2) == "0.20 to 0.30 over 2 folds (1, 2)"
    dec = spreads[("c10", "dec_proc", "brier")]
    assert dec.describe(1, 2) == "0.40 to 0.50 over 2 seeds (7, 8)"
    # Draws in numeric order (seed 2 before 10); a run of them named by its ends.
    assert sorted([10, 2, 1], key=spreads_module._draw_key) == [1, 2, 10]
    twenty = spreads_module.Spread(tuple(0.1 * s for s in range(20)), tuple(range(20)), ("h",) * 20)
    assert twenty.describe(1, 1) == "0.0 to 1.9 over 20 seeds (0 to 19)"
    assert spreads[("c10", "knn_proc", "brier")].describe(1, 2) == "0.60 (deterministic: one cell)"
    # Valk's TS+forest: cells differ in where his TS's stopping test let the temperature lie
    stops = spreads[("c10", "forest_proc", "brier")]
    assert stops.describe(1, 2) == "0.24 to 0.25 over 2 ts_stops (-1.0, 1.0)"


def test_a_spread_holds_only_the_draws_the_shipped_configs_give(tmp_path):
    """Cells of draws the configs no longer give (seeds of an earlier sweep, a procedure
    made deterministic since) stay in the store but out of the spread."""
    from calbench.results.store import COLUMNS, ResultStore

    store = ResultStore(tmp_path)
    cells = [
        ("old0", "spline_gupta_code", {"seed": 0}, 0.80),  # drawn orders, dropped since
        ("old1", "spline_gupta_code", {"seed": 1}, 0.90),
        ("now", "spline_gupta_code", {"seed": None}, 0.67),
        ("s3", "ms_odir_gupta_keras", {"seed": 3}, 0.99),  # not among seeds 15 to 34
        ("s15", "ms_odir_gupta_keras", {"seed": 15}, 0.91),
    ]
    for name, method, params, value in cells:
        rows = pd.DataFrame({column: [""] for column in COLUMNS}).assign(
            experiment="gupta_ks", dataset="c10", method=method, fold=0, metric="ks", value=value
        )
        store.write(name, rows, yaml.safe_dump({"method": {"name": method, "params": params}}))
    assert spreads_module.configured_draws("gupta_ks", "spline_gupta_code") == {"None"}
    spreads = spreads_module.procedure_spreads(
        tmp_path, "gupta_ks", ["spline_gupta_code", "ms_odir_gupta_keras"]
    )
    assert spreads[("c10", "spline_gupta_code", "ks")].cells == ("now",)
    assert spreads[("c10", "ms_odir_gupta_keras", "ks")].cells == ("s15",)


def test_a_cause_is_verified_only_where_the_procedure_spread_holds_the_printed_number(
    monkeypatch,
):
    """Gupta Table 1 prints VS 0.890, MS-ODIR 0.897, Dir-ODIR 1.057 (KS x100): a procedure
    spread holding the printed value (widened by half a printed unit) verifies the cause;
    one that misses it, or a procedure never run, leaves the row unexplained."""
    _fake_store(
        monkeypatch,
        {
            ("c10_densenet40", "vs", "ks_error"): 0.0100,
            ("c10_densenet40", "ms_odir", "ks_error"): 0.0100,
            ("c10_densenet40", "dir_odir", "ks_error"): 0.0100,
        },
    )
    rules = [
        Rule({"method": "vs"}, "Keras training stops early.", verify="vs_proc"),
        Rule({"method": "ms_odir"}, "Keras training stops early.", verify="ms_proc"),
        Rule({"method": "dir_odir"}, "Keras training stops early.", verify="dir_proc"),
    ]
    spreads = {
        # 0.8896 .. 0.8990 holds 0.890; 0.89745 lies half a unit from 0.897
        ("c10_densenet40", "vs_proc", "ks_error"): spreads_module.Spread(
            (0.008896, 0.00899), (15, 16), ("a", "b")
        ),
        ("c10_densenet40", "ms_proc", "ks_error"): spreads_module.Spread(
            (0.0089745, 0.0095), (15, 16), ("c", "d")
        ),
    }
    monkeypatch.setattr(report_module, "rules", lambda: rules)
    monkeypatch.setattr(report_module, "procedure_spreads", lambda *a: spreads)
    out = compare("gupta_ks").set_index(["table", "dataset", "method"])
    vs = out.loc[("Table 1", "c10_densenet40", "vs")]
    assert vs["status"] == "verified cause"
    # 0.8896 rounds to the printed 0.890; 0.8990 lies above it
    assert vs["procedure"] == (
        "vs_proc: 0.8896 to 0.8990 over 2 seeds (15, 16); "
        "seeds below / at / above the printed value: 0 / 1 / 1"
    )
    assert vs["cells"] == "h0 a b"
    assert out.loc[("Table 1", "c10_densenet40", "ms_odir"), "status"] == "verified cause"
    dir_odir = out.loc[("Table 1", "c10_densenet40", "dir_odir")]
    assert dir_odir["status"] == "unexplained" and dir_odir["procedure"] == "dir_proc: not run"
    assert dir_odir["note"].startswith("stated cause not yet verified")
    spreads[("c10_densenet40", "ms_proc", "ks_error")] = spreads_module.Spread(
        (0.00898, 0.0095), (15, 16), ("c", "d")
    )
    out = compare("gupta_ks").set_index(["table", "dataset", "method"])
    missed = out.loc[("Table 1", "c10_densenet40", "ms_odir")]
    assert missed["status"] == "unexplained" and missed["note"].startswith("the paper's procedure")
    assert missed["procedure"].endswith("seeds below / at / above the printed value: 0 / 0 / 2")


def test_a_spread_is_widened_by_the_numbers_stated_tolerance(monkeypatch):
    """Gupta Table 1 prints MS-ODIR 0.897 (KS x100). A rule's tolerance (what the metric's
    own arithmetic moves identical predictions by) widens the procedure's spread as it widens
    calbench's own value: draws 0.8980 and 0.9500 miss 0.897 by more than half a unit, and
    hold it within a tolerance of 0.002."""
    _fake_store(monkeypatch, {("c10_densenet40", "ms_odir", "ks_error"): 0.0100})
    spreads = {
        ("c10_densenet40", "ms_proc", "ks_error"): spreads_module.Spread(
            (0.00898, 0.0095), ("avx2", "native"), ("c", "d"), "arithmetic"
        )
    }
    monkeypatch.setattr(report_module, "procedure_spreads", lambda *a: spreads)
    for tolerance, status, place in (
        (None, "unexplained", "0 / 0 / 2"),
        (0.002, "verified cause", "0 / 1 / 1"),
    ):
        rule = Rule({"method": "ms_odir"}, "float32 BFGS.", tolerance=tolerance, verify="ms_proc")
        monkeypatch.setattr(report_module, "rules", lambda rule=rule: [rule])
        row = compare("gupta_ks").set_index(["table", "dataset", "method"])
        row = row.loc[("Table 1", "c10_densenet40", "ms_odir")]
        assert row["status"] == status
        assert row["procedure"] == (
            "ms_proc: 0.8980 to 0.9500 over 2 arithmetics (avx2, native); "
            f"arithmetics below / at / above the printed value: {place}"
        )


def test_a_spread_places_the_printed_number_among_its_draws():
    """Draws within half a printed unit of the printed number count as at it; the spread
    holds the number when some draw is not below it and some draw not above it, including
    a number that lies between two draws without rounding to either."""
    spread = spreads_module.Spread((0.10, 0.20, 0.30), (1, 2, 3), ("a", "b", "c"))
    half = 0.005
    assert spread.place(0.2, 1, half) == (1, 1, 1)
    assert spread.place(0.305, 1, half) == (2, 1, 0) and spread.holds(0.305, 1, half)
    assert spread.place(0.306, 1, half) == (3, 0, 0) and not spread.holds(0.306, 1, half)
    assert spread.place(0.094, 1, half) == (0, 0, 3) and not spread.holds(0.094, 1, half)
    assert spread.place(0.15, 1, half) == (1, 0, 2) and spread.holds(0.15, 1, half)
    # at the paper's scale (x100) the draws are 10, 20 and 30, a printed unit 0.1
    assert spread.place(20.0, 100, 0.05) == (1, 1, 1)
    assert spread.describe_place(15.0, 100, 0.05) == (
        "seeds below / at / above the printed value: 1 / 0 / 2"
    )


def test_report_reads_average_ranks_from_calbenchs_own_rank_table(monkeypatch):
    """Kull Tables 1-2 are average ranks: the report takes them from the kull_uci table spec
    built on the store (here two tasks where the ranks are known by construction)."""
    methods = [
        "dir_l2_kull_uci",
        "beta",
        "histbin_freq",
        "isotonic_plain",
        "histbin_width",
        "ts_kull_uci",
        "uncal",
    ]
    rows = [
        {
            "experiment": "kull_uci",
            "dataset": d,
            "classifier": "lda",
            "method": m,
            "metric": "log_loss",
            "value": 0.1 * (i + 1),
            "fold": 0,
            "written": 0.0,
            "config_hash": f"{d}-{m}",
        }
        for d in ("uci_iris", "uci_glass")
        for i, m in enumerate(methods)
    ]

    class FakeResults:
        @classmethod
        def of(cls, results_dir):
            return cls()

        def rows(self, experiment=None, latest=True):
            return pd.DataFrame(rows)

        def config(self, cell_hash):
            return {}

    monkeypatch.setattr(report_module, "Results", FakeResults)
    out = compare("kull_uci").set_index(["table", "dataset", "method"])
    lda = out.loc[("Table 2", "classifier:lda")]
    assert (
        lda.loc["dir_l2_kull_uci", "calbench"] == "1.00" and lda.loc["uncal", "calbench"] == "7.00"
    )
    assert lda.loc["dir_l2_kull_uci", "status"] == "unexplained"  # Kull prints 1.6 for lda
    assert out.loc[("Table 2", "classifier:all", "ts_kull_uci"), "calbench"] == "6.000"
    assert out.loc[("Table 2", "classifier:adas", "ts_kull_uci"), "status"] == "not run"
    assert (out.loc["Table 1"]["status"] == "not run").all()  # no p_cw_ece cells


def test_notes_are_well_formed():
    for rule in rules():
        assert rule.match and len(rule.note) > 30
        assert set(rule.match) <= {"paper", "table", "dataset", "method", "metric"}
        assert rule.tolerance is None or 0 < rule.tolerance < 1
        # a procedure that verifies a cause is a method config calbench can run
        assert rule.verify is None or rule.verify in group_files("method")


def test_a_note_that_states_a_measurement_appears_only_on_its_data_sets_rows():
    """A figure (three or more decimals, an exponent) or "this file" in a note is a
    measurement on one data set: its rule names that ``dataset``, so other networks' rows
    carry the general cause alone. kull_uci's rows aggregate all its data sets (average
    ranks by classifier), so a figure measured over them holds for every such row."""
    import re

    from calbench.reproduce.published import published

    measured = re.compile(r"\d\.\d{3,}|\de-\d|this file", re.IGNORECASE)
    rows = published(averages=True)
    text = {key: rows[key].astype(str) for key in ("paper", "table", "dataset", "method", "metric")}

    def matches(rule):  # `Rule.applies` over all rows at once
        mask = np.ones(len(rows), dtype=bool)
        for key, value in rule.match.items():
            mask &= (text[key] == str(value)).to_numpy()
        return mask

    networks = rows["preset"].isin(["gupta_ks", "valk_real", "kull_deepnet", "calarena_cv"])
    figures = np.zeros(len(rows), dtype=bool)  # rows that some figure-stating note reaches
    for rule in rules():
        if not measured.search(rule.note):
            continue
        mask = matches(rule)
        assert mask.any(), rule.match
        if "dataset" not in rule.match:
            assert (rows.loc[mask, "preset"] == "kull_uci").all(), (rule.match, rule.note[:80])
        figures |= mask
    # the rows of a network without figures of its own carry no DenseNet-40 figures
    elsewhere = networks & (rows["dataset"] != "c10_densenet40")
    assert not (figures & elsewhere.to_numpy()).any()


def _calbench(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "calbench.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def _reproduced(tmp_path, data_dir, preset, methods):
    out = _calbench(
        "run",
        "-m",
        f"experiment={preset}",
        "dataset=c10_densenet40",
        f"method={methods}",
        f"data_dir={data_dir}",
        f"results_dir={tmp_path}",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = compare(preset, tmp_path)
    return report[report["status"] != "not run"]


@pytest.mark.parametrize(
    "preset,tables",
    [
        # 13 s each: Gupta's and Kull's run in the slow suite, as do their whole presets
        # (test_whole_preset_on_densenet40_every_difference_explained); Valk's stays quick.
        pytest.param(
            "gupta_ks",
            {"Table 1", "Table 2", "Table 4", "Table 5", "Table 6"},
            marks=pytest.mark.slow,
        ),
        pytest.param("kull_deepnet", {"Table 3", "Table 4"}, marks=pytest.mark.slow),
        ("valk_real", {"Table 4", "Table 5", "Table 6", "Table 7", "Table 8", "Table 9"}),
    ],
)
def test_uncalibrated_and_ts_rows_of_each_paper(tmp_path, published_logits, preset, tables):
    """Uncalibrated and temperature-scaled DenseNet-40 CIFAR-10, from Kull et al.'s published
    pickle, through the preset's own metric definitions: every such printed number of the
    paper's tables, equal at the printed rounding (or within the tolerance its note states)."""
    ran = _reproduced(tmp_path, published_logits, preset, "uncal,ts")
    assert set(ran["table"]) >= tables
    bad = ran[~ran["status"].isin(["equal", "within tolerance"])]
    assert bad.empty, bad.to_string()
    if preset == "kull_deepnet":
        _intervals_hold_the_equal_numbers(tmp_path, preset)


def _intervals_hold_the_equal_numbers(results_dir, preset):
    """`calbench reproduce --ci`: each number's interval is the recentred bootstrap of its
    own cell (drawn again here), and a printed number equal to calbench's lies inside."""
    from calbench.results.store import ResultStore
    from calbench.stats.bootstrap import BootstrapSettings, bootstrap_cell

    settings = BootstrapSettings(resamples=200, seed=5, method="recentred")
    report = compare(preset, results_dir, intervals=settings)
    shown = report[report["interval"] != ""]
    assert len(shown) == (report["status"] != "not run").sum() > 0
    assert (shown.loc[shown["status"] == "equal", "inside"] == "yes").all()
    store = ResultStore(results_dir)
    rows = store.read(preset)
    row = shown.iloc[0]
    cell = rows[rows["config_hash"] == row["cells"].split(" ")[0]].iloc[0]
    boot = bootstrap_cell(
        store.predictions(cell["config_hash"], cell["predictions_sha256"]),
        {row["metric"]: store.config(cell["config_hash"])["metrics"][row["metric"]]},
        200,
        seed=5,
    )
    low, high = boot.interval(row["metric"], method="recentred")
    printed = published(preset).query(
        "table == @row.table and dataset == @row.dataset and method == @row.method "
        "and metric == @row.metric"
    )
    scale, places = float(printed["scale"].iloc[0]), decimals_of(row["published"]) + 1
    assert row["interval"] == f"[{scale * low:.{places}f}, {scale * high:.{places}f}]"


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset,at_least,verified",
    [("gupta_ks", 11, 13), ("kull_deepnet", 7, 5), ("valk_real", 88, 32)],
)
def test_whole_preset_on_densenet40_every_difference_explained(
    tmp_path, published_logits, preset, at_least, verified
):
    """`calbench reproduce PRESET` on DenseNet-40 CIFAR-10, its procedure twins run until
    their spreads hold the printed numbers (minutes: make test-slow): the numbers
    reproduced, a stated cause for every one that differs, and each row marked verified
    inside the spread of the procedure it names."""
    from calbench.reproduce.run import reproduce

    path, lines = reproduce(preset, published_logits, tmp_path)
    report = pd.read_csv(path.with_suffix(".csv"), keep_default_na=False, dtype=str)
    ran = report[report["status"] != "not run"]
    assert set(ran["dataset"]) == {"c10_densenet40"}
    assert ran["status"].isin(["equal", "within tolerance"]).sum() >= at_least, lines
    assert (ran["note"] != "cause not yet known").all()
    checked = ran[ran["status"] == "verified cause"]
    assert len(checked) >= verified, lines
    spreads = spreads_module.procedure_spreads(
        tmp_path, preset, set(checked["procedure"].str.split(":").str[0])
    )
    for row in checked.itertuples():
        method = row.procedure.split(":")[0]
        scale = float(
            published(preset)
            .query("table == @row.table and method == @row.method and metric == @row.metric")[
                "scale"
            ]
            .iloc[0]
        )
        values = np.array(spreads[(row.dataset, method, row.metric)].values) * scale
        half = 0.5 * 10.0 ** -decimals_of(row.published)
        assert values.min() - half <= float(row.published) + 1e-12
        assert float(row.published) <= values.max() + half + 1e-12
    assert "differ:" in lines[0] and "Reproduction of" in path.read_text()


def _recorded_runs(monkeypatch, held_after=None):
    """`calbench.reproduce.run.reproduce` on kull_deepnet with the runs recorded, not run;
    ``held_after``: the methods still unheld after each batch (`not_yet_held`'s answers)."""
    import calbench.reproduce.procedures as procedures_module
    import calbench.reproduce.run as run_module

    ran = []

    def record(preset, datasets, data_dir, results_dir, overrides=()):
        ran.append((preset, *overrides))

    monkeypatch.setattr(run_module, "run_preset", record)
    monkeypatch.setattr("calbench.data.install.usable_sets", lambda wanted, d: ["c10_densenet40"])
    if held_after is not None:
        answers = iter(held_after)
        monkeypatch.setattr(procedures_module, "not_yet_held", lambda *a: next(answers))
    return run_module, ran


def test_reproduce_fast_runs_no_procedure_twin(tmp_path, monkeypatch):
    """--fast runs the preset only, and an unverified stated cause says what verifying it
    takes."""
    run_module, ran = _recorded_runs(monkeypatch)
    run_module.reproduce("kull_deepnet", tmp_path, tmp_path, procedures="none")
    assert ran == [("kull_deepnet",)]
    hint = spreads_module.verify_hint("kull_deepnet", "vs_kull_keras")
    assert hint == (
        "Verify with `calbench reproduce kull_deepnet` (it runs kull_deepnet_procedure until its "
        "spread holds the printed number; at most about 60 minutes on 2 cores, were every "
        "seed needed). "
    )


def test_procedures_run_in_doubling_batches_only_for_methods_not_yet_held(tmp_path, monkeypatch):
    """Seeds 15-16 for the four methods; 17-18 for the two still unheld; 19-22 for the last;
    then it stops: a spread of a subset of the seeds holds whatever it holds for all 40."""
    keras = ["vs_kull_keras", "ms_odir_kull_keras_tuned", "dir_odir_kull_keras_tuned"]
    run_module, ran = _recorded_runs(monkeypatch, [keras[:2], keras[:1], []])
    run_module.reproduce("kull_deepnet", tmp_path, tmp_path)
    twin = "kull_deepnet_procedure"
    assert ran == [
        ("kull_deepnet",),
        (twin, f"method={','.join([*keras, 'dir_l2_kull_keras'])}", "method.params.seed=15,16"),
        (twin, f"method={','.join(keras[:2])}", "method.params.seed=17,18"),
        (twin, "method=vs_kull_keras", "method.params.seed=19,20,21,22"),
    ]


def test_a_number_never_held_costs_every_seed_once(tmp_path, monkeypatch):
    """Batches of 2, 2, 4, 8, 16 and the last 8: seeds 15 to 54, each run once."""
    run_module, ran = _recorded_runs(monkeypatch, [["vs_kull_keras"]] * 6)
    run_module.reproduce("kull_deepnet", tmp_path, tmp_path)
    seeds = [int(s) for run in ran[1:] for s in run[2].split("=")[1].split(",")]
    assert seeds == list(range(15, 55))
    assert [len(run[2].split(",")) for run in ran[1:]] == [2, 2, 4, 8, 16, 8]


def test_every_draw_runs_the_whole_twin(tmp_path, monkeypatch):
    run_module, ran = _recorded_runs(monkeypatch)
    run_module.reproduce("kull_deepnet", tmp_path, tmp_path, procedures="every_draw")
    assert ran == [("kull_deepnet",), ("kull_deepnet_procedure",)]


def test_witnesses_are_the_fewest_draws_that_meet_every_bound():
    """A hitting set greedy gets wrong: draw x meets two bounds, as a and b do, and comes
    first, so greedy needs x, a and b; a and b alone meet all four."""
    from calbench.reproduce.procedures import cover_first

    bounds = [{"x", "a"}, {"x", "b"}, {"a"}, {"b"}]
    assert cover_first(["x", "a", "b", "c"], bounds) == ["a", "b", "x", "c"]
    # Nothing to meet: the configured order; a bound no configured draw meets is dropped.
    assert cover_first(["3", "1", "2"], []) == ["3", "1", "2"]
    assert cover_first(["3", "1", "2"], [{"9"}, {"2"}]) == ["2", "3", "1"]


def _keras_twins(monkeypatch):
    """Rules naming twins for Gupta's VS and MS-ODIR, whose Table 1 KS spreads (x100) are
    0.8896 to 0.8990 (holding the printed 0.890) and 0.898 to 0.950 (missing 0.897)."""
    rules = [
        Rule({"method": "vs"}, "Keras training stops early.", verify="vs_proc"),
        Rule({"method": "ms_odir"}, "Keras training stops early.", verify="ms_proc"),
    ]
    spreads = {
        ("c10_densenet40", "vs_proc", "ks_error"): spreads_module.Spread(
            (0.008896, 0.00899), (15, 16), ("a", "b")
        ),
        ("c10_densenet40", "ms_proc", "ks_error"): spreads_module.Spread(
            (0.00898, 0.0095), (15, 16), ("c", "d")
        ),
    }
    monkeypatch.setattr(report_module, "rules", lambda: rules)
    monkeypatch.setattr(report_module, "procedure_spreads", lambda *a: spreads)


def test_verified_bounds_name_the_draws_on_each_side_of_a_held_number(monkeypatch):
    """Gupta Table 1 prints VS 0.890 (KS x100): of draws 0.8896 (seed 15) and 0.8990 (16),
    both lie at or above 0.890 less half a unit, only seed 15 at or below it plus half a
    unit; a spread that misses its number gives no bounds."""
    from calbench.reproduce.comparison import verified_bounds

    _keras_twins(monkeypatch)
    table1 = [b for b in verified_bounds("gupta_ks") if b[1] == "c10_densenet40"]
    assert ("vs_proc", "c10_densenet40", {"15", "16"}, {"15"}) in table1
    assert all(method == "vs_proc" for method, *_ in table1)


def test_stages_run_side_by_side_the_costliest_first_each_line_led_by_its_name(capsys):
    """Two lanes run at once (the first two stages each wait at a barrier the other must
    reach), a preset's sweep (``first``) before the rest, then the costliest; a child's
    lines in a lane come led by its stage's name; one lane runs the stages one after
    another as given, nothing prefixed."""
    import sys
    import threading

    from calbench.reproduce.lanes import Stage, in_lanes, lane
    from calbench.reproduce.run import run_child

    both = threading.Barrier(2, timeout=20)
    started = []

    def work(name):
        started.append(name)
        if len(started) <= 2:
            both.wait()  # raises BrokenBarrierError if the lanes ran one after another
        assert lane() == name
        assert run_child([sys.executable, "-c", f"print('from {name}'); print('done')"]) == 0

    costs = {"small": 0.1, "large": 5.0, "middle": 2.0, "sweep": 0.05}
    stages = [Stage(n, m, lambda n=n: work(n), first=n == "sweep") for n, m in costs.items()]
    in_lanes(stages, 2)
    assert set(started[:2]) == {"sweep", "large"} and started[2:] == ["middle", "small"]
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == sorted(
        [f"[{n}] from {n}" for n in costs] + [f"[{n}] done" for n in costs]
    )
    seen = []
    in_lanes([Stage(n, m, lambda n=n: seen.append((n, lane()))) for n, m in costs.items()], 1)
    assert seen == [(n, None) for n in costs]


def test_a_reproduction_runs_its_sweep_and_each_twin_as_stages(tmp_path, monkeypatch):
    """valk_real in two lanes: its sweep and each procedure twin are stages of their own,
    each twin's draws from its witnesses (TS+DEC: seeds 6 and 15), all run once."""
    import calbench.reproduce.procedures as procedures_module
    import calbench.reproduce.run as run_module
    from calbench.reproduce.lanes import lane

    ran = []

    def record(preset, datasets, data_dir, results_dir, overrides=()):
        ran.append((lane(), preset, *overrides))

    monkeypatch.setattr(run_module, "run_preset", record)
    monkeypatch.setattr("calbench.data.install.usable_sets", lambda wanted, d: ["c10_densenet40"])
    monkeypatch.setattr(procedures_module, "not_yet_held", lambda *a: [])
    run_module.reproduce_many(["valk_real"], tmp_path, tmp_path, lanes=2)
    assert sorted(ran) == sorted(
        [
            ("valk_real", "valk_real"),
            (
                "valk_real_procedure",
                "valk_real_procedure",
                "method=ms_odir_valk_keras,dir_odir_valk_keras",
                "method.params.seed=15,16",
            ),
            (
                "valk_real_procedure_dec",
                "valk_real_procedure_dec",
                "method=ts_dec_valk_code",
                "method.params.seed=6,15",
            ),
            ("valk_real_procedure_forest", "valk_real_procedure_forest"),
            (
                "valk_real_procedure_forest_stops",
                "valk_real_procedure_forest_stops",
                "method=ts_forest_valk_stops",
                "method.params.ts_stop=0.25,-0.5",
            ),
            (
                "valk_real_procedure_iop",
                "valk_real_procedure_iop",
                "method=iop_diag_rahimi_code",
                "method.params.fold=2,1",
            ),
            ("valk_real_procedure_knn", "valk_real_procedure_knn"),
        ]
    )


def test_a_number_whose_own_cell_is_not_stored_yet_is_not_held_unless_its_spread_holds_it(
    monkeypatch,
):
    """In lanes a twin's batch can end before its preset's own sweep has stored calbench's
    value: Gupta Table 1's MS-ODIR (0.897) is then "not run", and its twin must go on while
    its spread (0.898 to 0.950) misses it; VS (calbench 1.000, spread 0.8896 to 0.8990
    holding 0.890) is done. Numbers on data sets the twin did not run (c10_lenet5's, none
    stored) are not waited for."""
    from calbench.reproduce.procedures import not_yet_held

    vs = published("gupta_ks").query("method == 'vs' and dataset == 'c10_densenet40'")
    stored = {  # every VS number equal to its printed value but Table 1's
        ("c10_densenet40", "vs", m): p / s
        for m, p, s in zip(vs.metric, vs.printed, vs.scale, strict=True)
    }
    _fake_store(monkeypatch, stored | {("c10_densenet40", "vs", "ks_error"): 0.0100})
    _keras_twins(monkeypatch)
    methods = ["vs_proc", "ms_proc"]
    assert not_yet_held("gupta_ks", methods, "results", ["c10_densenet40"]) == ["ms_proc"]
    assert not_yet_held("gupta_ks", methods, "results") == []


def test_a_failed_stage_stops_every_stage_not_yet_started():
    """Two lanes: the slow stage runs on while the failing one fails; the third, not yet
    started, never starts; the failure is raised once the slow one has finished."""
    import time

    from calbench.reproduce.lanes import Stage, in_lanes

    ran = []

    def slow():
        time.sleep(0.5)
        ran.append("slow")

    def fails():
        raise ValueError("sweep failed")

    stages = [
        Stage("slow", 3.0, slow),
        Stage("fails", 2.0, fails),
        Stage("later", 1.0, lambda: ran.append("later")),
    ]
    with pytest.raises(ValueError, match="sweep failed"):
        in_lanes(stages, 2)
    assert ran == ["slow"]
