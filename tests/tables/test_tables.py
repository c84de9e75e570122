"""Ranking and the table layouts, on hand-made stores."""

import numpy as np
import pandas as pd
import pytest

from calbench.tables.catalogue import build_table
from calbench.tables.ranking import average_ranks, rank_row
from calbench.tables.render import to_csv, to_latex, to_markdown
from tests.conftest import store_row


def test_ties_share_the_best_rank_on_shown_values():
    # Valk Table 1 accuracy row: .624 .624 .627 .624 .626 .625 .625 .625 -> 6 6 1 6 2 3 3 3
    row = [0.6241, 0.6238, 0.627, 0.624, 0.626, 0.625, 0.6251, 0.6249]
    np.testing.assert_array_equal(rank_row(row, True, 3), [6, 6, 1, 6, 2, 3, 3, 3])
    np.testing.assert_array_equal(rank_row([0.2, np.nan, 0.1], False, 3), [2, np.nan, 1])
    np.testing.assert_allclose(average_ranks(np.array([[1, 2], [3, np.nan]])), [2, 2])


def _rows(values):
    records = []
    for (dataset, method, metric), value in values.items():
        for fold, delta in enumerate((-0.001, 0.001)):
            records.append(
                {
                    "experiment": "e",
                    "dataset": dataset,
                    "method": method,
                    "metric": metric,
                    "fold": fold,
                    "value": value + delta,
                }
            )
    return pd.DataFrame(records)


def direction(metric):
    return metric == "accuracy"


def test_metrics_by_method_layout():
    rows = _rows(
        {
            ("d", "a", "log_loss"): 0.5,
            ("d", "b", "log_loss"): 0.4,
            ("d", "c", "log_loss"): 0.3,
            ("d", "a", "accuracy"): 0.9,
            ("d", "b", "accuracy"): 0.8,
            ("d", "c", "accuracy"): 0.95,
        }
    )
    spec = {
        "name": "t",
        "experiment": "e",
        "layout": "metrics_by_method",
        "dataset": "d",
        "columns": {"a": "A", "b": "B", "c": "ref", "zz": "Missing"},
        "unranked": ["c"],
        "rows": {"log_loss": "log-loss", "accuracy": "accuracy"},
        "decimals": 3,
    }
    table = build_table(spec, rows, direction)
    assert table.columns == ["A", "B", "ref"]
    np.testing.assert_allclose(table.values[:, 0], [0.5, 0.9])  # mean over folds
    np.testing.assert_array_equal(table.ranks[:, :2], [[2, 1], [1, 2]])
    assert np.isnan(table.ranks[:, 2]).all()
    md = to_markdown(table)
    assert "| log-loss | 0.500<sub>2</sub> | **0.400**<sub>1</sub> | 0.300 |" in md
    assert "| average rank | 1.5 | 1.5 |  |" in md
    assert "Not yet in the store: method zz." in md
    tex = to_latex(table)
    assert r"\textbf{0.400}$_{1}$" in tex
    # A float with its caption and label, booktabs rules, the missing methods as a note.
    name = spec.get("name", "t").replace("_", "-")
    assert tex.startswith("\\begin{table}[htbp]\n\\centering\n\\caption{")
    assert f"\\label{{tab:{name}}}" in tex and tex.rstrip().endswith("\\end{table}")
    assert all(rule in tex for rule in (r"\toprule", r"\midrule", r"\bottomrule"))
    assert "Not yet in the store: method zz." in tex
    csv = to_csv(table)
    assert "log-loss,A,0.5" in csv


def test_datasets_by_method_groups_with_average_rank_per_group():
    values = {}
    for ds, (x, y) in {"c10_a": (1.0, 2.0), "c10_b": (3.0, 1.0), "c100_a": (5.0, 6.0)}.items():
        values[(ds, "m1", "classwise_ece")] = x / 100
        values[(ds, "m2", "classwise_ece")] = y / 100
    spec = {
        "name": "t",
        "experiment": "e",
        "layout": "datasets_by_method",
        "metric": "classwise_ece",
        "scale": 100,
        "decimals": 2,
        "columns": {"m1": "M1", "m2": "M2"},
        "rows": {"c10_a": ["C-10", "A"], "c10_b": ["C-10", "B"], "c100_a": ["C-100", "A"]},
    }
    table = build_table(spec, _rows(values), direction)
    np.testing.assert_allclose(table.values[:, 0], [1.0, 3.0, 5.0])
    groups = dict(table.average_rows)
    np.testing.assert_allclose(groups["C-10"], [1.5, 1.5])
    np.testing.assert_allclose(groups["C-100"], [1, 2])
    md = to_markdown(table)
    assert "| C-10 | A | **1.00**<sub>1</sub> | 2.00<sub>2</sub> |" in md
    assert "|  | B | 3.00<sub>2</sub> | **1.00**<sub>1</sub> |" in md


def test_table_without_any_method_says_what_to_run():
    from calbench.errors import CalbenchError

    spec = {
        "name": "t",
        "experiment": "valk_synthetic",
        "layout": "metrics_by_method",
        "dataset": "d",
        "columns": {"x": "X"},
        "rows": {"brier": "Brier"},
        "decimals": 3,
    }
    with pytest.raises(CalbenchError, match="calbench run experiment=valk_synthetic"):
        build_table(spec, _rows({("d", "a", "brier"): 0.1}), direction)


def test_incomplete_rows_are_shown_unranked():
    values = {("d1", "a", "brier"): 0.2, ("d1", "b", "brier"): 0.1, ("d2", "a", "brier"): 0.3}
    spec = {
        "name": "t",
        "experiment": "e",
        "layout": "datasets_by_method",
        "metric": "brier",
        "decimals": 3,
        "columns": {"a": "A", "b": "B"},
        "rows": {"d1": ["g", "one"], "d2": ["g", "two"]},
    }
    table = build_table(spec, _rows(values), direction)
    np.testing.assert_array_equal(table.ranks[0], [2, 1])
    assert np.isnan(table.ranks[1]).all() and table.values[1, 0] == pytest.approx(0.3)
    np.testing.assert_allclose(dict(table.average_rows)["g"], [2, 1])


def test_ranks_by_group_averages_task_ranks_per_classifier_with_friedman_p():
    # Tasks (data set, classifier) x methods a, b, c; log-loss, lower is better.
    losses = {
        ("d1", "knn"): (0.1, 0.2, 0.3),  # ranks 1, 2, 3
        ("d2", "knn"): (0.3, 0.1, 0.1),  # ranks 3, 1.5, 1.5 (tie shares the mean rank)
        ("d1", "lda"): (0.2, 0.3, 0.1),  # ranks 2, 3, 1
        ("d2", "lda"): (0.1, 0.3, 0.2),  # ranks 1, 3, 2
    }
    records = []
    for (dataset, classifier), values in losses.items():
        for method, value in zip("abc", values, strict=True):
            for fold in range(2):
                records.append(
                    {
                        "experiment": "e",
                        "dataset": dataset,
                        "classifier": classifier,
                        "method": method,
                        "metric": "log_loss",
                        "fold": fold,
                        "value": value,
                    }
                )
    spec = {
        "name": "t",
        "experiment": "e",
        "layout": "ranks_by_group",
        "group_by": "classifier",
        "metric": "log_loss",
        "title": "T.",
        "decimals": 2,
        "columns": {"a": "A", "b": "B", "c": "C"},
        "rows": {"knn": "knn", "lda": "lda", "qda": "qda"},
    }
    table = build_table(spec, pd.DataFrame(records), direction)
    np.testing.assert_allclose(table.values[0], [2.0, 1.75, 2.25])  # knn
    np.testing.assert_allclose(table.values[1], [1.5, 3.0, 1.5])  # lda
    np.testing.assert_allclose(table.values[2], [1.75, 2.375, 1.875])  # all four tasks
    assert [label for _, label in table.row_labels] == ["knn", "lda", "avg rank"]
    assert "classifier qda" in table.missing
    from scipy.stats import friedmanchisquare

    p = friedmanchisquare(*np.array(list(losses.values())).T).pvalue
    assert f"p = {p:.3g}" in table.title
    md = to_markdown(table)
    assert "| lda | **1.50** | 3.00 | **1.50** |" in md  # ranks not shown as subscripts


def test_hoki_layout_info_columns_underline_and_learning_time():
    records = []
    for dataset, (ece_a, ece_b, ece_c, acc, fit_acc) in {
        "d1": (0.05, 0.01, 0.02, 0.9, 0.92),
        "d2": (0.03, 0.04, 0.01, 0.7, 0.71),
    }.items():
        for method, ece, seconds in (("a", ece_a, 3.0), ("b", ece_b, 1.0), ("c", ece_c, 2.0)):
            for metric, value in (
                ("confidence_ece", ece),
                ("accuracy", acc),
                ("fit_accuracy", fit_acc),
            ):
                records.append(
                    {
                        "experiment": "e",
                        "dataset": dataset,
                        "method": method,
                        "metric": metric,
                        "fold": 0,
                        "value": value,
                        "fit_seconds": seconds,
                    }
                )
    rows = pd.DataFrame(records)
    spec = {
        "name": "t",
        "experiment": "e",
        "layout": "datasets_by_method",
        "metric": "confidence_ece",
        "decimals": 4,
        "underline_second": True,
        "show_ranks": False,
        "info_columns": {
            "Val Acc. (%)": {"metric": "fit_accuracy", "method": "a", "scale": 100, "decimals": 2},
            "Test Acc. (%)": {"metric": "accuracy", "method": "a", "scale": 100, "decimals": 2},
        },
        "columns": {"a": "A", "b": "B", "c": "C"},
        "rows": {"d1": ["G", "one"], "d2": ["G", "two"]},
    }
    md = to_markdown(build_table(spec, rows, direction))
    assert "| G | one | 92.00 | 90.00 | 0.0500 | **0.0100** | <u>0.0200</u> |" in md
    assert "|  | two | 71.00 | 70.00 | <u>0.0300</u> | 0.0400 | **0.0100** |" in md
    assert r"\underline{0.0200}" in to_latex(build_table(spec, rows, direction))
    timing = dict(spec, value="fit_seconds", metric="accuracy", info_columns={}, decimals=2)
    table = build_table(timing, rows, direction)
    np.testing.assert_allclose(table.values[0], [3.0, 1.0, 2.0])
    assert list(table.ranks[0]) == [3, 1, 2]  # less time is better


def test_every_shipped_table_spec_builds_from_a_complete_store():
    """Each spec's layout says which cells it reads (`needed_cells`); a store holding
    exactly those builds the table with nothing missing, whatever the layout."""
    import itertools

    from calbench.metrics import higher_is_better
    from calbench.tables.catalogue import needed_cells
    from calbench.tables.layouts import ANY
    from calbench.tables.write import table_specs

    rng = np.random.default_rng(0)
    direction = higher_is_better
    fill = {
        "dataset": ["d1", "d2"],
        "classifier": ["none"],
        "criterion": ["nll"],
        "shift": ["none"],
    }
    for name, spec in table_specs().items():
        needs = needed_cells(spec)
        pairs = needs.pop("pairs", None) or [(m, ANY) for m in needs.pop("method")]
        needs.setdefault("classifier", [ANY])
        needs.setdefault("shift", [ANY])
        columns = {c: (fill[c] if v == [ANY] else v) for c, v in needs.items()}
        records = [
            {
                "experiment": spec["experiment"],
                **dict(zip(columns, values, strict=True)),
                "method": method,
                "criterion": "nll" if criterion == ANY else criterion,
                "fold": fold,
                "value": rng.random(),
                "fit_seconds": rng.random(),
            }
            for values in itertools.product(*columns.values())
            for method, criterion in pairs
            for fold in range(2)
        ]
        table = build_table(spec, pd.DataFrame(records), direction)
        assert not [m for m in table.missing if m.startswith(("method", "dataset"))], name
        assert to_markdown(table) and to_latex(table) and to_csv(table), name
        assert np.isfinite(table.values).all(), name  # every cell it reads was named


def _store_curve(store, cell_hash, experiment, dataset, key, shift, value) -> None:
    """One stored risk-curve cell of ``key`` (method/criterion): 21 eps points x 3 folds,
    ``value(eps, fold)`` each."""
    from calbench.decision.family import curve_metric
    from tests.conftest import store_row

    method, criterion = key.split("/")
    records = [
        store_row(
            experiment=experiment,
            dataset=dataset,
            method=method,
            criterion=criterion,
            loss="l",
            shift=shift,
            protocol="nested",
            metric=curve_metric(eps),
            fold=fold,
            value=value(eps, fold),
            config_hash=cell_hash,
        )
        for eps in np.linspace(0, 1, 21)
        for fold in range(3)
    ]
    store.write(cell_hash, pd.DataFrame(records))


@pytest.mark.slow  # 17 s
def test_every_risk_curve_spec_writes_its_csv_table_and_figure(tmp_path):
    from calbench.decision.family import curve_metric
    from calbench.results.store import ResultStore
    from calbench.tables.write import table_specs, write_tables

    specs = {n: s for n, s in table_specs().items() if s["layout"] == "risk_curve"}
    assert len(specs) == 12  # Figs. 4.l, 4.m, 4.n, 4.o, 4.p, 4.q, real and stand-in
    rng = np.random.default_rng(0)
    store = ResultStore(tmp_path)
    cells = {}  # one stored cell per (experiment, shift, line), as a sweep stores them
    for spec in specs.values():
        shift = (spec.get("where") or {}).get("shift", "none")
        for lines in spec["panels"].values():
            cells.update({(spec["experiment"], shift, key): None for key in lines})
    for i, (experiment, shift, key) in enumerate(cells):
        _store_curve(store, f"{i:04d}", experiment, "d", key, shift, lambda eps, fold: rng.random())
    from calbench.plots.write import risk_curve_files

    written = {p.name for p in write_tables(tmp_path, echo=False, draw_curve=risk_curve_files)}
    for name, spec in specs.items():
        assert {f"{name}.{f}" for f in ("md", "tex", "csv", "png", "pdf")} <= written, name
        curves = pd.read_csv(tmp_path / "tables" / f"{name}.csv")
        line = curves[(curves["method"] == "uncal") & (curves["eps"] == 0.5)]
        assert line["folds"].tolist() == [3], name
        x = spec["x"]
        assert line["x"].iat[0] == pytest.approx(x["offset"] + 0.5 * x["scale"]), name
    # The curve's mean and std are those of the folds' values (one spec by hand).
    name = "ho_convex_dangerous_offline_fig_4m"
    rows = ResultStore(tmp_path).read("ho_convex_dangerous_offline")
    folds = rows[(rows["method"] == "vs") & (rows["criterion"] == "integral")]
    folds = folds[folds["metric"] == curve_metric(0.25)]["value"]
    curves = pd.read_csv(tmp_path / "tables" / f"{name}.csv").set_index(
        ["method", "criterion", "eps"]
    )
    assert curves.loc[("vs", "integral", 0.25), "mean"] == pytest.approx(folds.mean())
    assert curves.loc[("vs", "integral", 0.25), "std"] == pytest.approx(folds.std(ddof=1))
    table = (tmp_path / "tables" / f"{name}.md").read_text()
    assert "cost of missing a dangerous class = 325" in table and "SYNTHETIC" in table


def test_mean_std_layout_counts_each_fold_once():
    records = []
    for fold, (a, b) in enumerate([(10.0, 7.0), (12.0, 9.0), (14.0, 8.0)]):
        for criterion in ("nll", "ece"):  # uncal stored once per swept criterion: same rows
            records.append(
                {
                    "dataset": "d",
                    "method": "uncal",
                    "criterion": "none",
                    "metric": "empirical_risk_sum",
                    "fold": fold,
                    "value": a,
                }
            )
            records.append(
                {
                    "dataset": "d",
                    "method": "ts",
                    "criterion": criterion,
                    "metric": "empirical_risk_sum",
                    "fold": fold,
                    "value": b,
                }
            )
    spec = {
        "name": "t",
        "experiment": "e",
        "layout": "mean_std",
        "metric": "empirical_risk_sum",
        "decimals": 1,
        "columns": {"d": "D"},
        "rows": {
            "uncal/none": ["No calibration", "-"],
            "ts/nll": ["TS", "NLL"],
            "ts/direct": ["TS", "Direct Loss"],
        },
    }
    table = build_table(spec, pd.DataFrame(records), lambda m: False)
    np.testing.assert_allclose(table.values[:, 0], [12.0, 8.0])
    np.testing.assert_allclose(table.stds[:, 0], [2.0, 1.0])
    md = to_markdown(table)
    assert "| No calibration | - | 12.0 ± 2.0 |" in md and "| **8.0 ± 1.0** |" in md
    assert "method/criterion ts/direct" in table.missing


def test_a_curve_point_stored_twice_is_taken_from_the_newest_cell():
    from calbench.decision.family import curve_metric
    from calbench.tables.curves import curve_frame

    spec = {"name": "t", "experiment": "e", "panels": {"TS": ["ts/nll"]}}
    rows = pd.DataFrame(
        [
            {"dataset": "d", "method": "ts", "criterion": "nll", "fold": 0,
             "metric": curve_metric(0.5), "value": value, "written": written}
            for value, written in [(0.3, 200.0), (0.1, 100.0)]
        ]
    )  # fmt: skip
    assert curve_frame(spec, rows)["mean"].tolist() == [0.3]
    assert curve_frame(spec, rows.assign(written=[100.0, 200.0]))["mean"].tolist() == [0.1]


def test_an_experiment_without_a_paper_layout_gets_generic_ranked_tables(tmp_path, capsys):
    from calbench.results.store import ResultStore
    from calbench.tables.write import write_tables

    # Two tasks x three methods of a user's own sweep (experiment `default`); the true-map
    # error exists on the synthetic task only.
    values = {"mine": (0.9, 0.8, 0.7), "synthetic_dirichlet": (0.5, 0.7, 0.6)}
    store = ResultStore(tmp_path)
    for dataset, row in values.items():
        for method, value in zip(("ts", "vs", "knn_kl"), row, strict=True):
            metrics = {"log_loss": value, "fit_accuracy": 0.5}
            if dataset.startswith("synthetic"):
                metrics["true_classwise_ce"] = value / 10
            cell = pd.DataFrame(
                [
                    {
                        **store_row(experiment="default"),
                        "dataset": dataset,
                        "method": method,
                        "metric": m,
                        "value": v,
                        "config_hash": dataset + method,
                    }
                    for m, v in metrics.items()
                ]
            )
            store.write(dataset + method, cell, "{}")
    write_tables(tmp_path, "default", formats=("md",))
    out = capsys.readouterr().out
    assert "built 2 table(s) for default: default_log_loss, default_true_classwise_ce" in out
    md = (tmp_path / "tables" / "default_log_loss.md").read_text()
    assert "|  | knn_kl | ts | vs |" in md
    assert "| mine | **0.7000**<sub>1</sub> | 0.9000<sub>3</sub> | 0.8000<sub>2</sub> |" in md
    assert "| average rank | 1.5 | 2.0 | 2.5 |" in md  # (1 + 2) / 2, (3 + 1) / 2, (2 + 3) / 2
    assert "Friedman test over 2 tasks: p = 0.607." in md  # chi2 = 1.0 on 2 df
    true = (tmp_path / "tables" / "default_true_classwise_ce.md").read_text()
    assert "mine" not in true and "Not yet in the store" not in true


def test_risk_curves_of_two_networks_are_kept_apart(tmp_path):
    """Ho's presets on several real networks: each network's curves and table on their own,
    named after it, never averaged together."""
    from calbench.results.store import ResultStore
    from calbench.tables.write import table_specs, write_tables

    spec = table_specs()["ho_convex_reject_fig_4l"]
    keys = sorted({key for lines in spec["panels"].values() for key in lines})
    store = ResultStore(tmp_path)
    for n, (network, level) in enumerate((("net_a", 0.1), ("net_b", 0.9))):
        for i, key in enumerate(keys):
            value = lambda eps, fold, level=level: level + 0.01 * fold  # noqa: E731
            _store_curve(store, f"{n}{i:03d}", "ho_convex_reject", network, key, "none", value)
    written = {p.name for p in write_tables(tmp_path, "ho_convex_reject", ("md", "csv"), False)}
    assert {"ho_convex_reject_fig_4l_net_a.csv", "ho_convex_reject_fig_4l_net_b.md"} <= written
    for network, level in (("net_a", 0.1), ("net_b", 0.9)):
        curves = pd.read_csv(tmp_path / "tables" / f"ho_convex_reject_fig_4l_{network}.csv")
        assert set(curves["dataset"]) == {network}
        assert curves["mean"].to_numpy() == pytest.approx(level + 0.01)
        table = (tmp_path / "tables" / f"ho_convex_reject_fig_4l_{network}.md").read_text()
        assert f"Network: {network}." in table
