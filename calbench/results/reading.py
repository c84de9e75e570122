"""The store's rows read back whole: every cell's CSV checked, parsed a header's cells at a
time, given the columns earlier versions lacked, and the cells a newer one supersedes left
out (`superseded_cells`)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.hashing import config_hash
from calbench.results.columns import LABELS, OPTIONAL_COLUMNS, STORED_COLUMNS
from calbench.results.integrity import SEAL, DamagedCells, config_damage, config_mismatch, damage
from calbench.yaml_text import load_yaml


def read_rows(root: Path, experiment: str | None = None, latest: bool = True) -> pd.DataFrame:
    """All stored rows (optionally of one experiment) as one table.

    With ``latest`` (the default), where several cells carry the same labels and differ
    only in their method or criterion settings (a method's grid or a criterion option
    edited between runs), only the most recently written one is kept, so tables never
    average old and new settings; ``superseded_cells`` lists the others. Cells that
    differ elsewhere (a sweep over the loss, the shift's eps, the data) are all kept.
    """
    files = sorted(root.glob("*.csv"))
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
    frames = [_group_rows(root, header, cells, damaged) for header, cells in groups.items()]
    if damaged:
        raise DamagedCells(damaged)
    frame = with_earlier_columns(pd.concat(frames, ignore_index=True))
    if experiment is not None:
        frame = frame[frame["experiment"] == experiment]
    if latest:
        frame = frame[~frame["config_hash"].isin(superseded_cells(frame))]
    return frame


def _group_rows(root: Path, header: bytes, cells: list, damaged: dict) -> pd.DataFrame:
    """The rows of the cells (``(file, body)`` pairs) that share ``header``, parsed in one
    go, with when each was stored (``written``) and its setting and data content
    (`_setting`); damaged configs are added to ``damaged`` (all named at once), rows that
    name another cell than their file raise at once."""
    text = header + b"\n" + b"".join(body for _, body in cells)
    part = parse_csv(text)
    counts = [body.count(b"\n") for _, body in cells]
    names = np.repeat([f.stem for f, _ in cells], counts)
    misnamed = part["config_hash"].to_numpy() != names
    if misnamed.any():
        raise DamagedCells(
            {
                root / f"{name}.csv": "its rows name another cell than its file name"
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
        return part  # not read: the caller raises
    part["setting"] = np.repeat([s for s, _, _ in settings], counts)
    part["content"] = np.repeat([c for _, c, _ in settings], counts)
    part["code"] = np.repeat([c for _, _, c in settings], counts)
    return part


def is_stray(path: Path, data: bytes) -> bool:
    """Whether a CSV in the store is no cell's: not named by a config hash and without the
    rows' ``config_hash`` column (a file copied or saved there by hand). A cell's file that
    lost its header is still named by its hash, and so is damage, not a stray."""
    cell_name = len(path.stem) == 16 and all(c in "0123456789abcdef" for c in path.stem)
    return not cell_name and b"config_hash" not in data.partition(b"\n")[0]


def parse_csv(data: bytes) -> pd.DataFrame:
    # A checksum of digits and one "e" would otherwise be read as a number.
    return pd.read_csv(
        io.BytesIO(data),
        keep_default_na=False,
        dtype={"predictions_sha256": str, "config_sha256": str, "config_hash": str, SEAL: str},
    )


def with_earlier_columns(frame: pd.DataFrame) -> pd.DataFrame:
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


def _setting(config_file: Path, fallback: str, sealed: bool, digest: str) -> tuple:
    """A hash of a stored cell's config without its method and criterion sections, the
    content of the user's files it read ("" for other data; `calbench.data.identity`), and
    a hash of the user's code it ran ("" for calbench's own; `calbench.runner.code`).
    The config must be the one its rows name (``digest``); a cell with sealed rows has one
    beside it, one an earlier calbench stored may not (it is then never superseded)."""
    try:
        data = config_file.read_bytes()
    except FileNotFoundError:
        if sealed:
            raise DamagedCells({config_file: "its config is missing (removed?)"}) from None
        return fallback, "", ""
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
    code = config_hash(config["code"]) if config.get("code") else ""
    return config_hash({k: v for k, v in config.items() if k not in ignored}), content, code


def superseded_cells(frame: pd.DataFrame) -> list[str]:
    """Config hashes of cells that a more recently written cell replaces: one with the same
    labels and the same setting (all but method and criterion configs), or, for a data set
    read from the user's files, any cell of the same setting computed on the files' newest
    content (scores written again to the same path make every older cell stale); and, for a
    method of the user's own code, any cell of that method computed by code other than its
    newest cell's (an edit, then a rerun on one data set only, left the other data sets'
    cells of the old code in the same column, unmarked)."""
    if frame.empty or "setting" not in frame:
        return []
    key = LABELS + ["setting"]
    columns = [*key, "config_hash", "written", "content", "code"]
    cells = frame.drop_duplicates("config_hash").reindex(columns=columns)
    cells = cells.fillna({"content": "", "code": ""}).sort_values("written")
    replaced = set(cells[cells.duplicated(key, keep="last")]["config_hash"])
    for column, group in (
        ("content", ["experiment", "setting"]),
        ("code", ["experiment", "method"]),
    ):
        own = cells[cells[column] != ""]
        if not own.empty:
            newest = own.groupby(group)[column].transform("last")
            replaced |= set(own[own[column] != newest]["config_hash"])
    return sorted(replaced)
