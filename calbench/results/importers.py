"""Published results read into the store, by layout name: ``calbench import LAYOUT DIR``.

A benchmark's published per-task numbers become cells of the store, so ``leaderboard``,
``tables`` and ``report`` work on them as on calbench's own runs. Each layout's reader is
brought by the paper pack that publishes it (a pack's ``IMPORTERS``: name -> a function
``(source_dir, results_dir, collections) -> {experiment: (tasks, methods)}``, whose
docstring is its help); the library holds none of a benchmark's file format.
"""

from __future__ import annotations

from calbench.packs import PackRegistry

IMPORTERS = PackRegistry("IMPORTERS", {}, "results importer")
