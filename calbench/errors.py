"""The one error type users see.

Anything the user can fix (a missing file, a wrong shape, an unknown name) raises
`CalbenchError` with a message that names what is wrong and how to fix it; the CLI prints
that message alone and exits non-zero, never a traceback from deep inside.
"""

import difflib
import errno
import numbers


class CalbenchError(ValueError):
    """Bad input or configuration, with a message written for the user."""


def check_int(value, name: str, owner: str, minimum: int = 1) -> int:
    """Validate an integer parameter, worded as scikit-learn words it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise CalbenchError(
            f"The {name!r} parameter of {owner} must be an int >= {minimum}. Got {value!r} instead."
        )
    return int(value)


def check_choice(value, name: str, owner: str, choices) -> str:
    """Validate a string option against its allowed values."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise CalbenchError(
            f"The {name!r} parameter of {owner} must be one of {allowed}. Got {value!r} instead."
        )
    return value


def nearest(name, known) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to ``name``, or nothing. A name
    of two or three letters is one letter off at a similarity of 0.5 to 0.67 (``tz`` and
    ``ts``), below difflib's default 0.6: for those, 0.5."""
    cutoff = 0.5 if len(str(name)) <= 3 else 0.6
    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=cutoff)
    return f" (did you mean {match[0]!r}?)" if match else ""


#: What `calbench list KINDs` lists.
LISTABLE = ("method", "calibrator", "metric", "preset", "dataset", "table")


def unknown_name(kind: str, name, known, hint: str = "") -> CalbenchError:
    """The one form of every "no such X" error: the name, the nearest known one, the
    known ones (and ``hint``, e.g. where to find more)."""
    names = sorted(str(k) for k in known)
    # A long list is one line no one reads: its close matches, then how many there are.
    shown = names if len(names) <= 15 else difflib.get_close_matches(str(name), names, n=5)
    listed = ", ".join(shown)
    if not shown:  # (a bare "..." read as if the list had been cut off by mistake)
        listed = f"none close to it ({len(names)} in all"
        listed += f"; `calbench list {kind}s` lists them)" if kind in LISTABLE else ")"
    elif len(shown) < len(names):
        listed = f"{listed}, ... ({len(names)} in all"
        listed += f"; `calbench list {kind}s` lists them)" if kind in LISTABLE else ")"
    return CalbenchError(f"Unknown {kind} {name!r}{nearest(name, known)}; known: {listed}.{hint}")


def file_fault(exc: OSError) -> CalbenchError:
    """A failed read or write of a file (a full disk, a file where a folder should be, no
    permission) as one line naming the file: a fault of the folder, not of a method."""
    problem = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror or str(exc)
    where = exc.filename or "a file"
    hint = {
        errno.ENOSPC: "free space and run again (what was stored is whole)",
        errno.ENOTDIR: "a file stands where a folder belongs: move it away",
        errno.EEXIST: "a file stands where a folder belongs: move it away",
        errno.EACCES: "choose a writable folder (results_dir=DIR)",
        errno.EROFS: "choose a writable folder (results_dir=DIR)",
    }.get(exc.errno, "check the folder")
    return CalbenchError(f"{where}: {problem}; {hint}.")
