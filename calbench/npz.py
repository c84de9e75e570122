"""Reading npz files (user scores, stored predictions) with one clear error for anything
that is not an npz of plain arrays: numpy's own errors name neither the file nor the fix
(a text file gets advice to unpickle it, a ``.npy`` file fails on ``with``)."""

from __future__ import annotations

import io
import zipfile

import numpy as np

from calbench.errors import CalbenchError

_ZIP = b"PK\x03\x04"
_NPY = b"\x93NUMPY"


def npz_arrays(data: bytes, where: str) -> dict[str, np.ndarray]:
    """The arrays of the npz file whose bytes are ``data`` (``where`` names it in errors)."""
    if data.startswith(_NPY):
        raise CalbenchError(
            f"{where} is a .npy file (one unnamed array), not an npz: save the arrays by name, "
            "e.g. np.savez(path, logits_cal=..., y_cal=..., logits_test=..., y_test=...)."
        )
    if not data.startswith(_ZIP):
        raise CalbenchError(
            f"{where} is not an npz file (a zip of named .npy arrays, as np.savez writes); "
            f"it begins {data[:12]!r}."
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise CalbenchError(
                f"{where} holds Python objects (an object or ragged array), which calbench "
                "never unpickles: store numeric arrays only."
            ) from None
        raise CalbenchError(f"{where} is a damaged npz file ({exc}).") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CalbenchError(
            f"{where} is a damaged npz file ({type(exc).__name__}: {exc})."
        ) from None
