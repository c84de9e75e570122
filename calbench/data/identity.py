"""What a cell computed on, for a data set read from the user's own files.

A registered set's file is pinned by its published SHA-256 (the loader refuses other bytes)
or, where none is published, by the sum `calbench data fetch` recorded when it fetched the
file; a generated set is pinned by its options. A user's file is neither: the same path can
hold another model's scores tomorrow. So its cells are identified by the files' names and
the SHA-256 of their bytes instead of the path string: scores written again to the same path
get new cells (never "already in the store"), and a file moved to another folder keeps its
cells. The store keeps the identity beside each cell (``data`` in its config), so tables
show the cells of a file's newest content only, and two different files that would carry one
data set name are refused (`calbench.results.store`).
"""

from __future__ import annotations

import functools
from pathlib import Path

#: The loaders that read the user's files, and the options naming those files.
FILE_OPTIONS = {
    "npz": ("path",),
    "kull_pickle": ("path",),
    "torch_pair": ("path_cal", "path_test"),
    "superclass_pickle": ("path",),
    "superclass_npz": ("path",),
}


@functools.lru_cache(maxsize=256)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    from calbench.data.fetch import sha256_of

    return sha256_of(path)


def file_sha256(path) -> str | None:
    """The SHA-256 of a file's bytes (computed once per version of the file); None where
    there is no file (the loader then says what is missing)."""
    p = Path(path).expanduser()
    try:
        stat = p.stat()
    except OSError:
        return None
    if not p.is_file():
        return None
    return _sha256(str(p.resolve()), stat.st_mtime_ns, stat.st_size)


def data_identity(dataset: dict) -> dict | None:
    """``{"files": [{"file": NAME, "sha256": ...}, ...], "paths": [...]}`` for a data set
    read from the user's files; None for a registered or generated one."""
    keys = FILE_OPTIONS.get(dataset.get("loader"))
    if keys is None or (dataset.get("registry") or {}).get("files"):
        return None
    paths = [dataset.get(k) for k in keys]
    if any(p in (None, "", "???") for p in paths):
        return None
    return {
        "files": [{"file": Path(p).name, "sha256": file_sha256(p)} for p in paths],
        "paths": [str(Path(p).expanduser().resolve()) for p in paths],
    }


def user_files_name(dataset: dict) -> str:
    """The data set name a user's file gets in tables: ``dataset.name``, else the file's
    stem (the test file's, for a pair), as the loaders name it."""
    keys = FILE_OPTIONS[dataset["loader"]]
    return dataset.get("name") or Path(str(dataset[keys[-1]])).stem


def identity_key(identity: dict) -> dict:
    """What a cell's hash takes of a user's files: names and contents, not folders."""
    return {"files": identity["files"]}
