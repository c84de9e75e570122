"""The results: the store of cells (rows sealed by their checksum, configs, predictions and
the arrays they share), its locks and its checks, and the `Experiment` that tables,
statistics, plots, claims, reproduction and the report read once.

The runner writes through `store.ResultStore`; everything that reads results takes an
`experiment.Experiment` (or opens one from a ``results_dir``), so a page that shows an
experiment's leaderboards, tables and claims parses and checks each stored file once.
"""
