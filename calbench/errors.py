"""The one error type users see.

Anything the user can fix (a missing file, a wrong shape, an unknown name) raises
`CalbenchError` with a message that names what is wrong and how to fix it; the CLI prints
that message alone and exits non-zero, never a traceback from deep inside.
"""

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
