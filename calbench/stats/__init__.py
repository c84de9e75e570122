"""Statistics in one place: the bootstrap of a cell's stored predictions (`bootstrap`), the
metrics' resampled forms (`resampled`: each metric that is not a mean of per-sample terms,
on every resample at once), the arena's win rates and Bradley-Terry strengths (`arena`), and
the rank statistics over tasks, Friedman's test and critical differences (`ranks`).

It reads the runner's stored predictions and is read by the tables, figures, leaderboards
and reproductions.
"""
