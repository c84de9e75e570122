"""The leaderboard's statistics against the procedures written out (CalArena's win rate and
block bootstrap, a Bradley-Terry fit by a general optimiser), and end to end on a store."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import log_expit

from calbench.stats import arena

TABLE = pd.DataFrame(
    {
        "ts": [0.30, 0.50, 0.20, 0.41, 0.90],
        "vs": [0.28, 0.55, 0.20, 0.40, 0.95],
        "dir": [0.31, 0.45, 0.25, 0.40, 0.85],
        "uncal": [0.40, 0.60, 0.30, 0.50, 0.99],
    },
    index=["a / knn", "a / tree", "b / knn", "b / tree", "c / knn"],
)


def calarena_win_rates(df: pd.DataFrame) -> pd.DataFrame:
    """CalArena's utils.compute_winrates, per task: the share of the other methods with a
    strictly higher (worse) value."""
    out = {}
    for col in df.columns:
        others = df.columns.difference([col])
        out[col] = df[others].gt(df[col], axis=0).mean(axis=1)
    return pd.DataFrame(out)


def test_win_rates_are_calarenas_and_ties_beat_nobody():
    ours = arena.win_rates(arena.beats(TABLE.to_numpy()))
    np.testing.assert_allclose(ours, calarena_win_rates(TABLE).to_numpy())
    # b / knn: ts and vs tie at 0.20; each beats dir and uncal only.
    assert ours[2].tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0.0])
    # Higher is better (accuracy) turns the order round.
    flipped = arena.win_rates(arena.beats(-TABLE.to_numpy(), higher_is_better=True))
    np.testing.assert_allclose(flipped, ours)


def test_block_bootstrap_is_total_wins_over_total_tasks_of_the_drawn_blocks():
    per_task = arena.win_rates(arena.beats(TABLE.to_numpy()))
    blocks = [t.split(" / ")[0] for t in TABLE.index]
    counts, index = arena.block_counts(blocks, 50, np.random.default_rng(7))
    ours = arena.bootstrap_means(per_task, counts, index)
    # Written out: the same draws, the drawn blocks' tasks concatenated.
    labels = np.unique(blocks)
    drawn = np.random.default_rng(7).integers(0, len(labels), (50, len(labels)))
    for r in range(50):
        rows = np.concatenate([np.flatnonzero(np.array(blocks) == labels[b]) for b in drawn[r]])
        np.testing.assert_allclose(ours[r], per_task[rows].sum(axis=0) / len(rows))


def test_bradley_terry_equals_a_general_optimiser_on_the_pairwise_games():
    wins = arena.beats(TABLE.to_numpy())
    counts = arena.pairwise_wins(wins)
    # Written out: one term per game, a tie half a win each way, the same prior.
    games = []
    for t in range(len(TABLE)):
        for i in range(4):
            for j in range(4):
                if i != j and (wins[t, i, j] or not (wins[t, i, j] or wins[t, j, i])):
                    games.append((i, j, 1.0 if wins[t, i, j] else 0.5))
    i, j, w = map(np.array, zip(*games, strict=True))

    def objective(theta):
        return -(w * log_expit(theta[i] - theta[j])).sum() + theta @ theta / (
            2 * arena.PRIOR_VARIANCE
        )

    reference = minimize(objective, np.zeros(4), method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(arena.bradley_terry(counts), reference - reference.mean(), atol=1e-6)


def test_bradley_terry_two_methods_is_the_log_odds_of_their_wins():
    """A beats B on 3 of 4 tasks: θ_A - θ_B = ln 3 without a prior; the weak prior pulls
    it in by under 1%."""
    counts = np.array([[0.0, 3.0], [1.0, 0.0]])
    theta = arena.bradley_terry(counts)
    assert theta[0] - theta[1] == pytest.approx(np.log(3), rel=0.01)
    assert theta[0] - theta[1] < np.log(3)
    assert arena.elo(theta).mean() == pytest.approx(arena.ELO_BASE)
    # Undefeated: finite, thanks to the prior.
    assert np.isfinite(arena.bradley_terry(np.array([[0.0, 5.0], [0.0, 0.0]]))).all()


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """Three synthetic tasks, four methods each, stored with their predictions."""
    from calbench.runner.job import run_job
    from tests.runner.test_runner import plan

    results = tmp_path_factory.mktemp("arena")
    for task, seed in (("task_a", 1), ("task_b", 2), ("task_c", 3)):
        for method in ("uncal", "ts", "vs", "bcts"):
            run_job(
                plan(
                    f"method={method}",
                    f"dataset.name={task}",
                    f"dataset.seed={seed}",
                    "dataset.n_test=1200",
                    "dataset.n_cal=800",
                    f"results_dir={results}",
                )
            )
    return results


def test_leaderboard_of_a_store_counts_only_wins_the_paired_test_confirms(store_dir):
    from calbench.results.store import ResultStore
    from calbench.stats.bootstrap import BootstrapSettings, bootstrap_cell
    from calbench.tables.leaderboard import leaderboard, to_latex, to_markdown, write_leaderboard

    tmp_path = store_dir
    settings = BootstrapSettings(resamples=200, seed=5)
    board = leaderboard(tmp_path, "default", "log_loss", settings)
    store = ResultStore(tmp_path)
    rows = store.read()
    log_loss = rows[rows["metric"] == "log_loss"]
    values = log_loss.pivot_table(index="dataset", columns="method", values="value")
    values = values[board.values.columns]
    expected = calarena_win_rates(values).mean()
    np.testing.assert_allclose(board.table.loc[expected.index, "win_rate"], expected)
    # Clear wins and the counts against TS from each cell's own bootstrap, by hand.
    clear = pd.Series(0.0, index=values.columns)
    better_than_ts = pd.Series(0, index=values.columns)
    for task, cells in log_loss.groupby("dataset"):
        reps = {}
        for method, cell in cells.groupby("method"):
            h, sha = cell["config_hash"].iat[0], cell["predictions_sha256"].iat[0]
            boot = bootstrap_cell(store.predictions(h, sha), {"log_loss": {}}, 200, seed=5)
            reps[method] = boot.replicates["log_loss"]
        for a in values.columns:
            for b in values.columns:
                low, high = np.quantile(reps[a] - reps[b], [0.025, 0.975])
                if values.loc[task, a] < values.loc[task, b] and (high < 0 or low > 0):
                    clear[a] += 1 / (len(values.columns) - 1) / len(values)
                    if b == "ts":
                        better_than_ts[a] += 1
    np.testing.assert_allclose(board.table.loc[clear.index, "clear_win_rate"], clear)
    assert board.table.loc[better_than_ts.index, "better_than_ts"].tolist() == (
        better_than_ts.tolist()
    )
    assert (board.table["win_rate_low"] <= board.table["win_rate"] + 1e-12).all()
    assert board.table.loc["uncal", "win_rate"] < board.table.loc["ts", "win_rate"]
    assert board.per_task["best"].tolist() == values.idxmin(axis=1).tolist()
    fits = log_loss.groupby("method")["fit_seconds"].median()  # one fold and row a task
    np.testing.assert_allclose(board.table.loc[fits.index, "median_fit_seconds"], fits)
    assert board.per_task["ts_value"].tolist() == values["ts"].tolist()
    markdown = to_markdown(board)
    assert "over 3 tasks in 3 blocks" in markdown and "| uncal" in markdown
    assert r"\toprule" in to_latex(board) and "log\\_loss" in to_latex(board)
    paths = write_leaderboard(board, tmp_path / "lb")
    assert sorted(p.suffix for p in paths) == [".csv", ".md", ".tex"]
    csv = pd.read_csv(tmp_path / "lb" / "default_log_loss.csv", index_col="method")
    assert csv.loc["ts", "win_rate"] == pytest.approx(board.table.loc["ts", "win_rate"], rel=1e-5)


def test_claims_verdicts_on_constructed_leads():
    from calbench.reproduce.claims import lead_and_verdict

    rng = np.random.default_rng(0)
    noise = rng.normal(scale=0.01, size=(3, 500))
    # holds: 0.10 against 0.20 and 0.25 (a loss), clearly ahead on every resample.
    lead, low, high, verdict = lead_and_verdict(
        0.10,
        np.array([0.20, 0.25]),
        0.10 + noise[0],
        np.array([0.20, 0.25])[:, None] + noise[1:],
        False,
        0.05,
    )
    assert verdict == "holds" and lead == pytest.approx(0.10) and 0 < low < lead < high
    # fails: the best other is clearly ahead.
    assert (
        lead_and_verdict(0.30, np.array([0.20]), 0.30 + noise[0], 0.20 + noise[1:2], False, 0.05)[3]
        == "fails"
    )
    # undecided: a lead well inside the resampling noise.
    assert (
        lead_and_verdict(
            0.200, np.array([0.201]), 0.200 + noise[0], 0.201 + noise[1:2], False, 0.05
        )[3]
        == "undecided"
    )
    # A score (higher is better): the lead is the method's excess over the best other.
    lead, *_, verdict = lead_and_verdict(
        0.9,
        np.array([0.8, 0.7]),
        0.9 + noise[0],
        np.array([0.8, 0.7])[:, None] + noise[1:],
        True,
        0.05,
    )
    assert verdict == "holds" and lead == pytest.approx(0.1)


def test_claims_on_a_store_match_the_paired_bootstrap_by_hand(store_dir):
    from calbench.reproduce.claims import Claim, check_claims, summary, to_markdown
    from calbench.results.store import ResultStore
    from calbench.stats.bootstrap import BootstrapSettings, bootstrap_cell

    claims = [
        Claim("ts_beats_uncal", "p", "t", "TS beats uncal", "log_loss", "ts", ("uncal",)),
        Claim("uncal_beats_ts", "p", "t", "uncal beats TS", "log_loss", "uncal", ("ts",)),
        Claim("vs_best", "p", "t", "VS beats all", "log_loss", "vs", "all", tasks="task_[ab]"),
        Claim("dir_beats_ts", "p", "t", "not run", "log_loss", "dir", ("ts",)),
    ]
    settings = BootstrapSettings(resamples=200, seed=1)
    checked = check_claims(store_dir, "default", claims, settings)
    assert len(checked[checked["claim"] == "vs_best"]) == 2  # the task filter
    assert set(checked.loc[checked["claim"] == "dir_beats_ts", "verdict"]) == {"not run"}
    store = ResultStore(store_dir)
    rows = store.read()
    rows = rows[rows["metric"] == "log_loss"]
    for _, r in checked[checked["claim"] == "vs_best"].iterrows():
        reps, values = {}, {}
        for method, cell in rows[rows["dataset"] == r["task"]].groupby("method"):
            h, sha = cell["config_hash"].iat[0], cell["predictions_sha256"].iat[0]
            boot = bootstrap_cell(store.predictions(h, sha), {"log_loss": {}}, 200, seed=1)
            reps[method], values[method] = boot.replicates["log_loss"], cell["value"].iat[0]
        others = ["bcts", "ts", "uncal"]
        by_hand = np.min([reps[m] for m in others], axis=0) - reps["vs"]
        low, high = np.quantile(by_hand, [0.025, 0.975])
        assert (r["low"], r["high"]) == pytest.approx((low, high))
        assert r["lead"] == pytest.approx(min(values[m] for m in others) - values["vs"])
    ts = checked[checked["claim"] == "ts_beats_uncal"].set_index("task")
    un = checked[checked["claim"] == "uncal_beats_ts"].set_index("task")
    np.testing.assert_allclose(ts["lead"], -un["lead"])
    # Opposite claims get opposite verdicts (or both undecided).
    flip = {"holds": "fails", "fails": "holds", "undecided": "undecided"}
    assert [flip[v] for v in ts["verdict"]] == un["verdict"].tolist()
    table = summary(checked)
    assert table[["holds", "fails", "undecided", "not run"]].sum(axis=1).tolist() == [3, 3, 2, 3]
    assert "## The papers' claims on default" in to_markdown("default", checked, settings)


def test_competitors_are_method_and_criterion_and_tasks_split_by_shift():
    """Ho's sweeps: TS fitted to the NLL and to the ECE compete as two methods, and each
    prior shift is a task of its own (uncal, which fits nothing, keeps its name)."""
    from calbench.tables.leaderboard import block_of, labelled
    from tests.conftest import store_row

    rows = pd.DataFrame(
        [
            store_row(dataset="c100", method=m, criterion=c, shift=s, metric="log_loss")
            for m, c in (("ts", "nll"), ("ts", "ece"), ("uncal", "none"))
            for s in ("lt_k1", "lt_stronger")
        ]
    )
    out = labelled(rows)
    assert sorted(set(out["method"])) == ["ts/ece", "ts/nll", "uncal"]
    assert sorted(set(out["dataset"])) == ["c100 / shift=lt_k1", "c100 / shift=lt_stronger"]
    assert {block_of(t) for t in out["dataset"]} == {"c100"}
    # One criterion: the methods keep their names.
    plain = labelled(rows[rows["criterion"] != "ece"])
    assert sorted(set(plain["method"])) == ["ts", "uncal"]


def test_flagged_tasks_count_the_tasks_a_tables_mark_would_flag():
    """The leaderboard ranked cells the tables mark ‡ (refuted certainties) without a word."""
    from calbench.tables.leaderboard import flagged_tasks

    rows = pd.DataFrame(
        {
            "config_hash": ["a1", "a1", "b1", "b2", "b2"],
            "metric": ["wrong_certainties", "fit_unconverged", "wrong_certainties"] * 1
            + ["wrong_certainties", "log_loss"],
            "value": [3.0, 0.0, 0.0, 1.0, 0.7],
        }
    )
    cells = pd.DataFrame(
        {"iso": [["a1"], ["a2"]], "hist": [["b1"], ["b2"]]}, index=["task_a", "task_b"]
    )
    assert flagged_tasks(rows, cells, "wrong_certainties").tolist() == [1, 1]
    assert flagged_tasks(rows, cells, "fit_unconverged").tolist() == [0, 0]


def test_the_per_task_column_says_when_ts_is_the_best():
    """It said "no (tied)" of TS against itself."""
    from calbench.tables.leaderboard_text import ts_told_apart

    assert [ts_told_apart("ts", False), ts_told_apart("vs", False), ts_told_apart("vs", True)] == [
        "TS is the best",
        "no (tied)",
        "yes",
    ]
