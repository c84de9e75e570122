"""A stored cell's rows carry their own checksum, so a reader knows a file is whole.

Every row of ``store/<hash>.csv`` ends with the column ``cell_sha256``: the SHA-256 of the
cell's CSV text as written with that column empty. A file cut inside a value or at a line
end, reduced to its header, edited, with a row missing or appended twice, or replaced by
other bytes no longer matches it, and the rows' ``config_hash`` must be the file's name, so
a cell copied under another name is caught too. The file stays a plain CSV that pandas
reads as it is. Cells stored before the column existed are checked for their shape alone:
every line as many fields as the header, every value a number.

`damage` says what is wrong with one file; `calbench.results.store` checks each file it
reads with it, and `calbench store verify` every file of a store.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

from calbench.errors import CalbenchError

#: The last column of a sealed cell's rows.
SEAL = "cell_sha256"
_DIGITS = 64


def seal(text: str) -> str:
    """``text`` (a CSV whose header ends with `SEAL` and whose rows leave it empty) with
    its SHA-256 written into every row's last field."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    header, _, body = text.partition("\n")
    # Fields hold no line breaks, so every ",\n" ends a row and its empty last field.
    return header + "\n" + body.replace(",\n", "," + digest + "\n")


def damage(data: bytes, cell_hash: str, check_name: bool = True) -> str | None:
    """Why ``data``, the rows file of cell ``cell_hash``, cannot be trusted; None where it
    can. ``check_name=False`` leaves the rows' ``config_hash`` to the caller (the store's
    reader compares all files' at once)."""
    if not data.strip():
        return "the file is empty"
    header, _, body = data.partition(b"\n")
    if not body.strip():
        return "it holds a header and no rows (cut short)"
    if not body.endswith(b"\n"):
        return "its last line is cut short"
    names = header.decode(errors="replace").split(",")
    if "config_hash" not in names:
        return "it has no config_hash column"
    if names[-1] == SEAL:
        problem = _sealed_damage(header, body)
        # The checksum covers every row, and the writer gives them one config_hash: the
        # first row's is the file's.
        rows = [next(csv.reader([body.partition(b"\n")[0].decode(errors="replace")]))]
    else:
        problem, rows = _shape_damage(data)
    if problem or not check_name:
        return problem
    named = {row[names.index("config_hash")] for row in rows} - {cell_hash}
    if named:
        return f"its rows name another cell ({sorted(named)[0]}) than its file name"
    return None


def _sealed_damage(header: bytes, body: bytes) -> str | None:
    digest = body.partition(b"\n")[0].rpartition(b",")[2]
    if len(digest) != _DIGITS:
        return "its checksum field is damaged"
    unsealed = body.replace(b"," + digest + b"\n", b",\n")
    if hashlib.sha256(header + b"\n" + unsealed).hexdigest().encode() != digest:
        return "its rows do not match their checksum (cut, edited, or rows added or removed)"
    return None


def _shape_damage(data: bytes) -> tuple[str | None, list[list[str]]]:
    """A file stored without a checksum: the shape a whole file has; and its rows."""
    try:
        lines = list(csv.reader(io.StringIO(data.decode())))
    except (UnicodeDecodeError, csv.Error) as exc:
        return f"it is not a CSV file ({exc})", []
    header, rows = lines[0], lines[1:]
    if "value" not in header:
        return "it has no value column", rows
    value = header.index("value")
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            return f"line {number} has {len(row)} fields, the header {len(header)}", rows
        try:
            float(row[value])
        except ValueError:
            return f"line {number}'s value {row[value]!r} is not a number", rows
    return None, rows


#: The last line of a sealed config: a YAML comment, so every reader parses the file as is.
CONFIG_SEAL = "# config_sha256: "


def seal_config(text: str) -> str:
    """A cell's config (YAML text ending in a line break) with a last line holding the
    SHA-256 of the text above it."""
    return f"{text}{CONFIG_SEAL}{hashlib.sha256(text.encode()).hexdigest()}\n"


def config_damage(data: bytes) -> str | None:
    """Why a cell's config cannot be trusted (None where it can): a sealed one cut, edited
    or replaced; one an earlier calbench wrote without a seal that does not parse as a
    mapping."""
    from calbench.yaml_text import load_yaml

    body, _, last = data.rstrip(b"\n").rpartition(b"\n")
    if last.startswith(CONFIG_SEAL.encode()):
        digest = last[len(CONFIG_SEAL) :].decode(errors="replace")
        if hashlib.sha256(body + b"\n").hexdigest() != digest:
            return "its config does not match its checksum (cut, edited or replaced)"
        return None
    if not data.strip():
        return "its config is empty"
    try:
        config = load_yaml(data.decode())
    except Exception as exc:  # any parser's complaint: the file is damaged
        return f"its config does not parse ({type(exc).__name__})"
    if not isinstance(config, dict):
        return "its config is not a mapping (cut or replaced)"
    return None


def config_mismatch(data: bytes, digest: str) -> str | None:
    """Where a cell's rows name its config's SHA-256 (``digest``; "" in cells stored
    before they did), whether the config file is that one."""
    if digest and hashlib.sha256(data).hexdigest() != digest:
        return "its config is not the one its rows name (cut, edited or replaced)"
    return None


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
