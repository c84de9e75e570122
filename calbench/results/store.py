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

import numpy as np
import pandas as pd

from calbench.atomic import atomic_write_text
from calbench.errors import CalbenchError
from calbench.hashing import config_hash
from calbench.results import predictions as fold_predictions
from calbench.results.integrity import (
    SEAL,
    config_damage,
    config_mismatch,
    damage,
    seal,
    seal_config,
)
from calbench.results.names import DataNames, MethodNames
from calbench.results.predictions import FoldPredictions
from calbench.yaml_text import load_yaml

#: The labels that name a cell in tables; two stored cells sharing them (and their setting,
#: see `superseded_cells`) supersede each other.
LABELS = [
    "experiment",
    "dataset",
    "classifier",
    "method",
    "criterion",
    "loss",
    "shift",
    "protocol",
    "seed",
]

COLUMNS = [
    *LABELS[:-1],
    "fold",
    "metric",
    "value",
    "fit_seconds",
    "params",
    "fitted",
    "config_hash",
    "seed",
    "calbench_version",
    "predictions_sha256",
]

#: Columns a cell's rows may lack (those of earlier versions, or rows made by hand), and
#: what they hold then: ``fitted`` (`Calibrator.learned` per fold, JSON) came in 2026-11.
OPTIONAL_COLUMNS = {"fitted": "{}"}

#: What the store adds to a cell's `COLUMNS`: when it was stored, and the rows' checksum.
STORED_COLUMNS = [*COLUMNS, "config_sha256", "stored_at", SEAL]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


class DamagedCells(CalbenchError):
    """Stored rows files that fail their check (`calbench.results.integrity`)."""

    def __init__(self, problems: dict[Path, str]):
        self.problems = problems
        shown = [f"{path}: {why}" for path, why in list(problems.items())[:5]]
        more = f"\n  ... and {len(problems) - 5} more" if len(problems) > 5 else ""
        super().__init__(
            f"{len(problems)} stored cell(s) are damaged and were not read:\n  "
            + "\n  ".join(shown)
            + more
            + "\n`calbench store verify --repair` moves them to store/damaged/; the next "
            "`calbench run` of their sweep computes them again."
        )


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
        frame = _with_earlier_columns(_parse(data))
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
        """All stored rows (optionally of one experiment) as one table (`_read`). A cell
        that a writer is rewriting (`calbench rescore`: its config, then its rows, each
        whole, under the cell's lock) can look damaged between the two writes: such cells
        are read again once their writers let go of them, and only then named."""
        try:
            return self._read(experiment, latest)
        except DamagedCells as damaged:
            from calbench.results.locks import cell_lock

            try:
                for path in damaged.problems:
                    with cell_lock(self.root, path.stem):
                        pass
            except (CalbenchError, OSError):  # no locks here (a read-only store): as found
                raise damaged from None
            return self._read(experiment, latest)

    def _read(self, experiment: str | None = None, latest: bool = True) -> pd.DataFrame:
        """All stored rows (optionally of one experiment) as one table.

        With ``latest`` (the default), where several cells carry the same labels and differ
        only in their method or criterion settings (a method's grid or a criterion option
        edited between runs), only the most recently written one is kept, so tables never
        average old and new settings; ``superseded_cells`` lists the others. Cells that
        differ elsewhere (a sweep over the loss, the shift's eps, the data) are all kept.
        """
        files = sorted(self.root.glob("*.csv"))
        if not files:
            return pd.DataFrame(columns=STORED_COLUMNS)
        # Cells sharing a header are parsed in one go (one parser call instead of one per
        # cell: 1e6 rows in 2000 cells read in about 2 s); a cell's rows are its lines.
        groups: dict[bytes, list] = {}
        damaged = {}
        for f in files:
            data = f.read_bytes()
            if is_stray(f, data):
                continue  # not a cell's: `calbench store verify` names it
            problem = damage(data, f.stem, check_name=False)
            if problem:
                damaged[f] = problem
                continue
            header, _, body = data.partition(b"\n")
            groups.setdefault(header, []).append((f, body))
        if damaged:
            raise DamagedCells(damaged)
        frames = []
        for header, cells in groups.items():
            text = header + b"\n" + b"".join(body for _, body in cells)
            part = _parse(text)
            counts = [body.count(b"\n") for _, body in cells]
            names = np.repeat([f.stem for f, _ in cells], counts)
            misnamed = part["config_hash"].to_numpy() != names
            if misnamed.any():
                raise DamagedCells(
                    {
                        self.root / f"{name}.csv": "its rows name another cell than its file name"
                        for name in sorted(set(names[misnamed]))
                    }
                )
            part["written"] = _written(part, [f for f, _ in cells], counts)
            sealed = header.rstrip(b"\r").endswith(SEAL.encode())
            digests = _first_of_each(part, "config_sha256", counts)
            settings = []
            for (f, _), digest in zip(cells, digests, strict=True):
                try:
                    settings.append(_setting(f.with_suffix(".yaml"), f.stem, sealed, digest))
                except DamagedCells as exc:  # every damaged config named at once
                    damaged.update(exc.problems)
            if damaged:
                continue
            part["setting"] = np.repeat([s for s, _ in settings], counts)
            part["content"] = np.repeat([c for _, c in settings], counts)
            frames.append(part)
        if damaged:
            raise DamagedCells(damaged)
        frame = _with_earlier_columns(pd.concat(frames, ignore_index=True))
        if experiment is not None:
            frame = frame[frame["experiment"] == experiment]
        if latest:
            frame = frame[~frame["config_hash"].isin(superseded_cells(frame))]
        return frame


def is_stray(path: Path, data: bytes) -> bool:
    """Whether a CSV in the store is no cell's: not named by a config hash and without the
    rows' ``config_hash`` column (a file copied or saved there by hand). A cell's file that
    lost its header is still named by its hash, and so is damage, not a stray."""
    cell_name = len(path.stem) == 16 and all(c in "0123456789abcdef" for c in path.stem)
    return not cell_name and b"config_hash" not in data.partition(b"\n")[0]


def _parse(data: bytes) -> pd.DataFrame:
    # A checksum of digits and one "e" would otherwise be read as a number.
    return pd.read_csv(
        io.BytesIO(data),
        keep_default_na=False,
        dtype={"predictions_sha256": str, "config_sha256": str, "config_hash": str, SEAL: str},
    )


def _with_earlier_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of any calbench's store with today's columns: values as numbers, and the
    columns cells stored by earlier versions lack filled in."""
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    # Cells stored before predictions were kept have no checksum column.
    for column in ("predictions_sha256", "config_sha256"):  # absent from earlier cells
        sha256 = frame[column] if column in frame else ""
        frame[column] = pd.Series(sha256, index=frame.index).fillna("")
    for name, default in OPTIONAL_COLUMNS.items():
        frame[name] = frame[name].fillna(default) if name in frame else default
    if "classifier" in frame:  # cells stored before the column existed: no classifier
        frame["classifier"] = frame["classifier"].fillna("none").replace("", "none")
    else:
        frame["classifier"] = "none"
    return frame


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


def _written(part: pd.DataFrame, files: list[Path], counts: list[int]) -> np.ndarray:
    """When each row's cell was stored (seconds): its ``stored_at``, which copying a store
    or touching its files does not change; a cell stored before the column existed has
    only its file's time."""
    mtimes = np.repeat([f.stat().st_mtime for f in files], counts).astype(float)
    if "stored_at" not in part:
        return mtimes
    stamps = pd.to_datetime(part["stored_at"].replace("", None), utc=True, format="ISO8601")
    seconds = (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    return np.where(np.isnan(seconds), mtimes, seconds)


def _first_of_each(part: pd.DataFrame, column: str, counts: list[int]) -> list[str]:
    """Each cell's value of a per-cell ``column`` ("" where the cells lack it)."""
    if column not in part:
        return [""] * len(counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    return [str(v) if v == v else "" for v in part[column].to_numpy()[starts]]


def _setting(config_file: Path, fallback: str, sealed: bool, digest: str) -> tuple[str, str]:
    """A hash of a stored cell's config without its method and criterion sections, and the
    content of the user's files it read ("" for other data; `calbench.data.identity`).
    The config must be the one its rows name (``digest``); a cell with sealed rows has one
    beside it, one an earlier calbench stored may not (it is then never superseded)."""
    try:
        data = config_file.read_bytes()
    except FileNotFoundError:
        if sealed:
            raise DamagedCells({config_file: "its config is missing (removed?)"}) from None
        return fallback, ""
    problem = config_mismatch(data, digest) or config_damage(data)
    if problem:
        raise DamagedCells({config_file: problem})
    config = load_yaml(data.decode()) or {}
    # Metrics added later by `calbench rescore` do not make a cell a different setting, nor
    # does the content of the files read or of the user's code (new content supersedes the
    # old), nor the data's shape recorded beside them.
    ignored = ("method", "criterion", "rescored", "data", "code", "shape")
    files = (config.get("data") or {}).get("files") or []
    content = "+".join(str(f.get("sha256")) for f in files)
    return config_hash({k: v for k, v in config.items() if k not in ignored}), content


def superseded_cells(frame: pd.DataFrame) -> list[str]:
    """Config hashes of cells that a more recently written cell replaces: one with the same
    labels and the same setting (all but method and criterion configs), or, for a data set
    read from the user's files, any cell of the same setting computed on the files' newest
    content (scores written again to the same path make every older cell stale)."""
    if frame.empty or "setting" not in frame:
        return []
    key = LABELS + ["setting"]
    columns = [*key, "config_hash", "written", "content"]
    cells = frame.drop_duplicates("config_hash").reindex(columns=columns).fillna({"content": ""})
    cells = cells.sort_values("written")
    replaced = set(cells[cells.duplicated(key, keep="last")]["config_hash"])
    read_files = cells[cells["content"] != ""]
    if not read_files.empty:
        newest = read_files.groupby(["experiment", "setting"])["content"].transform("last")
        replaced |= set(read_files[read_files["content"] != newest]["config_hash"])
    return sorted(replaced)
