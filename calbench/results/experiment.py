"""A results folder read once: what every reader of results takes.

`Results` opens a ``results_dir``; its rows are read and checked (every rows file against
its checksum, every config against the checksum its rows name) the first time they are
asked for, and then served from memory, as are the cells' configs and predictions. A
command builds one and hands it to the leaderboards, tables, claims, figures and the report,
so one ``calbench report E --html`` reads each stored file once. Readers also accept a
``results_dir`` (`Results.of` opens it), for callers that read once anyway.

A `Results` is a snapshot for one command: cells written after its first read are not in it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from calbench.errors import CalbenchError, nearest
from calbench.results.predictions import FoldPredictions
from calbench.results.reading import superseded_cells
from calbench.results.store import ResultStore


class Results:
    """The stored results under one ``results_dir``, read and checked once."""

    def __init__(self, results_dir):
        self.dir = Path(results_dir)
        self.store = ResultStore(self.dir)
        self._all: pd.DataFrame | None = None
        self._superseded: set[str] | None = None
        self._configs: dict[str, dict] = {}
        self._predictions: dict[tuple[str, str], list[FoldPredictions]] = {}

    @classmethod
    def of(cls, source) -> Results:
        """``source`` itself where it is a `Results`, else the folder it names, opened."""
        return source if isinstance(source, Results) else cls(source)

    @property
    def root(self) -> Path:
        """The store's folder (the bootstrap draws' cache lives under it)."""
        return self.store.root

    def __fspath__(self) -> str:  # where a folder is wanted (figures, tables), this one's
        return str(self.dir)

    def rows(self, experiment: str | None = None, latest: bool = True) -> pd.DataFrame:
        """Every stored row (of ``experiment``), as `ResultStore.read` gives them: with
        ``latest``, without the cells a newer one supersedes."""
        if self._all is None:
            if self.dir.exists() and not self.dir.is_dir():
                raise CalbenchError(
                    f"--results-dir {self.dir} is a file, not a results folder; give the "
                    "folder `calbench run results_dir=...` wrote."
                )
            self._all = self.store.read(latest=False)
            self._superseded = set(superseded_cells(self._all))
        rows = self._all
        if experiment is not None:
            rows = rows[rows["experiment"] == experiment]
        if latest and self._superseded:
            rows = rows[~rows["config_hash"].isin(self._superseded)]
        return rows

    def experiment_rows(self, experiment: str) -> pd.DataFrame:
        """The latest rows of ``experiment``, or one error saying how to get some."""
        rows = self.rows(experiment)
        if rows.empty:
            raise CalbenchError(self._no_experiment(experiment))
        protocols = set(rows["protocol"])
        if "published" in protocols and len(protocols) > 1:
            # One ranking of published numbers and calbench's own runs would compare them
            # as one kind of result, and a task named alike in both would be counted twice.
            raise CalbenchError(
                f"Experiment {experiment!r} holds both imported published results and "
                "calbench's runs; rerun yours with experiment_name=OTHER (or import into "
                "another --results-dir), then compare them with `calbench leaderboard OTHER "
                f"--beside {experiment}`."
            )
        return rows

    def _no_experiment(self, experiment: str) -> str:
        """Why ``experiment`` has no rows, with the nearest stored name and how to get it."""
        from calbench.conf_files import group_files

        stored = sorted(set(self.rows()["experiment"])) if self.store.root.is_dir() else []
        if experiment in group_files("experiment"):
            how = f"Run `calbench run experiment={experiment}` first."
        else:
            how = (
                "Runs without experiment= are stored as `default`, and experiment_name=NAME "
                "names your own runs."
            )
        return (
            f"No experiment {experiment!r} in {self.dir}{nearest(experiment, stored)}; it "
            f"stores {', '.join(stored) or 'none yet'}. {how}"
        )

    def superseded(self) -> list[str]:
        """The cells a newer cell supersedes (`superseded_cells`)."""
        self.rows()
        return sorted(self._superseded or ())

    def config(self, cell_hash: str) -> dict:
        """A cell's config (`ResultStore.config`), read once."""
        if cell_hash not in self._configs:
            self._configs[cell_hash] = self.store.config(cell_hash)
        return self._configs[cell_hash]

    def predictions(self, cell_hash: str, sha256: str) -> list[FoldPredictions]:
        """A cell's per-fold predictions (`ResultStore.predictions`), read once."""
        key = (cell_hash, sha256)
        if key not in self._predictions:
            self._predictions[key] = self.store.predictions(cell_hash, sha256)
        return self._predictions[key]
