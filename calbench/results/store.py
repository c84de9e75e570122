"""The results store: one CSV per finished cell, written atomically, named by config hash.

A cell (one resolved configuration: experiment, dataset, method, criterion, loss, shift,
protocol, metrics, seed) writes all its rows at once to ``store/<hash>.csv`` through a
temporary file and ``os.replace``, so a reader sees the whole cell or nothing; its
per-fold predictions go first to ``store/<hash>.npz`` (`calbench.results.predictions`),
named by checksum in the rows. Each row carries the time the cell was stored
(``stored_at``) and the rows' own checksum (`calbench.results.integrity`), checked on every
read: a damaged file is named in one error, never read as numbers. A cell whose file
exists and is whole is done: an interrupted sweep resumes by skipping it; one whose file
is damaged is moved to ``store/damaged/`` and computed again. Writers of one cell take its
lock (`calbench.results.locks`), so two sweeps never compute it twice over or lose a
metric that `calbench rescore` added.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.results import predictions as fold_predictions
from calbench.results.columns import COLUMNS as COLUMNS
from calbench.results.columns import OPTIONAL_COLUMNS, STORED_COLUMNS
from calbench.results.integrity import (
    SEAL,
    config_damage,
    damage,
    seal,
    seal_config,
)
from calbench.results.integrity import DamagedCells as DamagedCells
from calbench.results.names import DataNames, MethodNames
from calbench.results.predictions import FoldPredictions
from calbench.results.reading import parse_csv, read_rows, with_earlier_columns
from calbench.yaml_text import load_yaml


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


class ResultStore:
    """Cells under ``<results_dir>/store``; see the module docstring."""

    def __init__(self, results_dir):
        self.root = Path(results_dir) / "store"

    def _csv(self, cell_hash: str) -> Path:
        return self.root / f"{cell_hash}.csv"

    def has_file(self, cell_hash: str) -> bool:
        return self._csv(cell_hash).is_file()

    def has(self, cell_hash: str) -> bool:
        """Whether the cell is stored and its rows are whole."""
        return self.has_file(cell_hash) and self.damage(cell_hash) is None

    def damage(self, cell_hash: str) -> str | None:
        """What is wrong with a stored cell's rows file (None: nothing, or no file)."""
        path = self._csv(cell_hash)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return damage(data, cell_hash)

    def damaged_folder(self) -> Path:
        """``store/damaged/``, where damaged files go (made where absent)."""
        folder = self.root / "damaged"
        if folder.exists() and not folder.is_dir():
            raise CalbenchError(
                f"{folder} is a file where calbench keeps damaged cells (a folder): move it "
                "away, then run again."
            )
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def quarantine(self, cell_hash: str) -> Path:
        """Move a cell's files (rows, config, predictions) to ``store/damaged/``, where
        nothing reads them, so the cell counts as not stored; returns that folder."""
        folder = self.damaged_folder()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in (".csv", ".yaml", ".npz"):
            path = self.root / f"{cell_hash}{suffix}"
            if path.exists():
                os.replace(path, folder / f"{cell_hash}.{stamp}{suffix}")
        return folder

    def write(
        self, cell_hash: str, rows: pd.DataFrame, config_text: str = "", predictions=None
    ) -> Path:
        """Store a finished cell; its resolved config goes beside it for provenance, and its
        per-fold predictions (``(folds, storage)``, see `calbench.results.predictions`) before
        the rows, whose ``predictions_sha256`` column then names them."""
        # Every cell has its config beside it (an empty one where none is given), named by
        # checksum in its rows: a config removed, cut or swapped is damage.
        config_sha256 = self.write_config(cell_hash, config_text or "{}\n")
        sha256 = (
            ""
            if predictions is None
            else fold_predictions.write(self.root, cell_hash, *predictions)
        )
        return self.replace_rows(
            cell_hash,
            rows,
            config_hash=cell_hash,
            predictions_sha256=sha256,
            config_sha256=config_sha256,
        )

    def claim_data_name(self, experiment: str, name: str, data: dict) -> None:
        """Record that data set ``name`` of ``experiment`` is the user's files ``data``, or
        refuse it where other files carry that name (`calbench.results.names`)."""
        DataNames(self.root).claim(experiment, name, data, self.configs)

    def claim_method_name(self, experiment: str, name: str, calibrator: str) -> None:
        """Record that method ``name`` of ``experiment`` is ``calibrator``, or refuse it
        where that name stands for another (`calbench.results.names`)."""
        MethodNames(self.root).claim(experiment, name, calibrator, self.configs)

    def remove(self, cell_hash: str) -> None:
        """Remove a cell that another replaces (an imported file's earlier content): its
        rows first, so no reader sees the cell without them."""
        for suffix in (".csv", ".yaml", ".npz"):
            (self.root / f"{cell_hash}{suffix}").unlink(missing_ok=True)

    def configs(self) -> dict[str, dict]:
        """Every stored cell's config, by hash (a config that does not parse is left out:
        `calbench store verify` names it)."""
        configs = {}
        for path in sorted(self.root.glob("*.yaml")):
            data = path.read_bytes()
            if config_damage(data) is None:
                configs[path.stem] = load_yaml(data.decode()) or {}
        return configs

    def _yaml(self, cell_hash: str) -> Path:
        return self.root / f"{cell_hash}.yaml"

    def write_config(self, cell_hash: str, config_text: str) -> str:
        """Write a cell's config (sealed, `calbench.results.integrity.seal_config`); returns
        the file's SHA-256, which the cell's rows name (``config_sha256``)."""
        text = seal_config(config_text)
        atomic_write_text(self._yaml(cell_hash), text)
        return hashlib.sha256(text.encode()).hexdigest()

    def config(self, cell_hash: str) -> dict:
        """A stored cell's resolved config, checked (`DamagedCells` where it is cut or
        edited); empty where none was stored beside it."""
        path = self._yaml(cell_hash)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return {}
        problem = config_damage(data)
        if problem:
            raise DamagedCells({path: problem})
        return load_yaml(data.decode()) or {}

    def replace_rows(
        self, cell_hash: str, rows: pd.DataFrame, stored_at: str | None = None, **constants
    ) -> Path:
        """Write a cell's rows (all of them, at once; `calbench rescore` adds metrics);
        ``constants`` give columns that hold one value for the whole cell. ``stored_at``
        (default: now) is the time the cell was run, by which `read` tells the latest of
        several settings; adding metrics keeps it."""
        path = self._csv(cell_hash)
        text = csv_text(
            rows, STORED_COLUMNS, **constants, stored_at=stored_at or now_iso(), **{SEAL: ""}
        )
        atomic_write_text(path, seal(text))
        return path

    def cell(self, cell_hash: str) -> pd.DataFrame:
        """One stored cell's rows, checked (`DamagedCells` where its file fails); a cell
        stored before ``stored_at`` existed takes its file's time."""
        path = self._csv(cell_hash)
        if not path.is_file():
            raise CalbenchError(f"No stored cell {cell_hash} in {self.root}.")
        data = path.read_bytes()
        problem = damage(data, cell_hash)
        if problem:
            raise DamagedCells({path: problem})
        frame = with_earlier_columns(parse_csv(data))
        if "stored_at" not in frame:
            mtime = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
            frame["stored_at"] = mtime.isoformat()
        return frame

    def predictions(self, cell_hash: str, sha256: str) -> list[FoldPredictions]:
        """A stored cell's per-fold predictions, checked against the rows' checksum."""
        if not sha256:
            raise CalbenchError(
                f"cell {cell_hash} was stored without predictions (predictions=none, or by an "
                "earlier calbench); rerun it with force=true to store them."
            )
        return fold_predictions.read(self.root, cell_hash, sha256)

    def read(self, experiment: str | None = None, latest: bool = True) -> pd.DataFrame:
        """All stored rows (optionally of one experiment) as one table (`read_rows`). A cell
        that a writer is rewriting (`calbench rescore`: its config, then its rows, each
        whole, under the cell's lock) can look damaged between the two writes: such cells
        are read again once their writers let go of them, and only then named."""
        try:
            return read_rows(self.root, experiment, latest)
        except DamagedCells as damaged:
            from calbench.results.locks import cell_lock

            try:
                for path in damaged.problems:
                    with cell_lock(self.root, path.stem):
                        pass
            except (CalbenchError, OSError):  # no locks here (a read-only store): as found
                raise damaged from None
            return read_rows(self.root, experiment, latest)


def csv_text(frame: pd.DataFrame, columns: list[str], **constants) -> str:
    """``frame.assign(**constants)[columns].to_csv(index=False)``, the same text, in a
    quarter of the time (0.3 ms for a cell's rows against 1.3, and no copy of the frame for
    the constants: a sweep's bookkeeping, `benchmarks.bench_sweep`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)

    def column(name):
        if name in constants:
            return [constants[name]] * len(frame)
        if name not in frame and name in OPTIONAL_COLUMNS:
            return [OPTIONAL_COLUMNS[name]] * len(frame)
        return frame[name].tolist()

    # pandas writes a missing value as an empty field, Python's csv as "nan"
    values = [["" if v != v else v for v in column(c)] for c in columns]
    writer.writerows(zip(*values, strict=True))
    return buffer.getvalue()
