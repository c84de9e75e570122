"""Rank-confidence sets and the blocks a benchmark needs to tell two methods apart."""

import numpy as np
import pytest

from calbench.stats.arena import blocks_to_tell_apart, rank_sets


def test_a_method_first_in_every_resample_has_rank_set_1_and_swapping_methods_share_one():
    rng = np.random.default_rng(0)
    draws = np.column_stack(
        [np.full(1000, 0.9), rng.uniform(0.4, 0.6, 1000), rng.uniform(0.4, 0.6, 1000)]
    )
    best, worst = rank_sets(draws)
    assert (best[0], worst[0]) == (1, 1)
    assert (best[1], worst[1]) == (2, 3) and (best[2], worst[2]) == (2, 3)
    # A tie shares the better rank: two methods equal in every resample are both 1.
    best, worst = rank_sets(np.full((50, 2), 0.5))
    assert list(best) == [1, 1] and list(worst) == [1, 1]


def test_blocks_needed_follow_the_square_root_law():
    """A gap of 0.1 whose bootstrap spread is 0.1 with 20 blocks needs 20 (1.96)^2 = 76.8
    blocks for the interval to exclude 0; a gap as large as 2 z se needs a quarter."""
    rng = np.random.default_rng(1)
    spread = rng.normal(0, 1, 200_000)
    spread = (spread - spread.mean()) / spread.std(ddof=1) * 0.1
    draws = np.column_stack([0.6 + spread, np.full_like(spread, 0.5)])
    needed = blocks_to_tell_apart(np.array([0.6, 0.5]), draws, 20, leader=0)
    assert np.isnan(needed[0])
    assert needed[1] == pytest.approx(20 * 1.959964**2, rel=1e-4)
    far = blocks_to_tell_apart(np.array([0.6, 0.4]), draws, 20, leader=0)
    assert far[1] == pytest.approx(needed[1] / 4, rel=1e-4)
    tied = blocks_to_tell_apart(np.array([0.6, 0.6]), draws, 20, leader=0)
    assert np.isinf(tied[1])
    # One block: every resample is it, no spread; "0 blocks" was shown for each method.
    one = np.tile([0.6, 0.5], (100, 1))
    assert np.isnan(blocks_to_tell_apart(np.array([0.6, 0.5]), one, 1, leader=0)).all()


def test_a_leaderboard_over_few_data_sets_says_its_intervals_cannot_be_trusted(tmp_path):
    """Two data sets: the caption carries the caveat; under 5 tasks no CD diagram is drawn
    (its critical difference could separate nothing), from 5 it is."""
    from calbench.papers.calarena2026.importer import import_calarena
    from calbench.plots.leaderboard import leaderboard_cd_figure
    from calbench.tables.leaderboard import caption, leaderboard
    from tests.papers.calarena2026.test_importer import write_calarena

    write_calarena(tmp_path / "source")
    import_calarena(tmp_path / "source", tmp_path / "results")
    board = leaderboard(tmp_path / "results", "calarena_published_tabrepo_multiclass", "brier")
    assert "Only 2 block(s) of tasks: the intervals cannot be trusted" in caption(board)
    assert len(leaderboard_cd_figure(board, tmp_path / "figures")) == 1
    four = leaderboard(
        tmp_path / "results",
        "calarena_published_tabrepo_multiclass",
        "brier",
        tasks=board.values.index[:4],
    )
    assert leaderboard_cd_figure(four, tmp_path / "four") == []
