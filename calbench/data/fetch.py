"""Downloads of registered data files: resumable, verified, atomic.

A download streams into ``<file>.part`` with a progress bar; an interrupted one resumes
from the bytes it has (HTTP Range) or restarts when the server ignores the range. The
finished file is checked against its SHA-256 (refused and deleted on mismatch) and only
then renamed into place, so a half-downloaded file is never read as data. Where the registry
knows no sum, the one the server publishes is checked instead: the Hugging Face hub sends a
Git LFS file's SHA-256 as ``X-Linked-Etag`` on its redirect to the storage that serves it
(`published_sha256`). `install_from`
does the same from a local folder (offline machines, tests, CI). The sums of the files
calbench fetched are recorded in ``<data_dir>/.checksums.json`` as provenance (and as the
cache key of generated stand-ins); the pickle loader trusts only the registry's sums.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from calbench.errors import CalbenchError

CHECKSUMS = ".checksums.json"
_BLOCK = 1 << 20


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def recorded_checksums(data_dir) -> dict[str, str]:
    path = Path(data_dir) / CHECKSUMS
    return json.loads(path.read_text()) if path.is_file() else {}


def record_checksum(data_dir, filename: str, digest: str) -> None:
    from calbench.atomic import atomic_write_text

    checksums = recorded_checksums(data_dir)
    checksums[filename] = digest
    atomic_write_text(Path(data_dir) / CHECKSUMS, json.dumps(checksums, indent=1, sort_keys=True))


def _refuse(
    name: str, digest: str, expected: str, where: str, by: str = "the registry expects"
) -> CalbenchError:
    return CalbenchError(
        f"Refused {name} from {where}: its SHA-256 is {digest}, {by} {expected}. "
        "It is not the published file (corrupted, truncated, or another version)."
    )


def install_from(source, dest, sha256: str | None = None) -> Path:
    """Copy ``source`` to ``dest`` through a temporary file, verifying ``sha256`` first."""
    import shutil

    from calbench.atomic import atomic_tmp_path

    source, dest = Path(source), Path(dest)
    if not source.is_file():
        raise CalbenchError(f"{source} does not exist; nothing to install.")
    digest = sha256_of(source)
    if sha256 and digest != sha256:
        raise _refuse(dest.name, digest, sha256, str(source.parent))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_tmp_path(dest) as tmp:
        shutil.copyfile(source, tmp)
    record_checksum(dest.parent, dest.name, digest)
    return dest


def _sha256_header(headers) -> str | None:
    """The SHA-256 a response's ``X-Linked-Etag`` publishes (the hub's LFS object id, quoted,
    possibly weak: ``W/"<64 hex>"``); None where there is none or it is no SHA-256."""
    value = (headers or {}).get("X-Linked-Etag") or ""
    value = value.removeprefix("W/").strip().strip('"').lower()
    return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else None


class _SumKeepingRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, keeping the sum the first hop publishes: the hub's
    header is on its redirect, not on the storage's response."""

    published: str | None = None

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.published = self.published or _sha256_header(headers)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def published_sha256(redirects: _SumKeepingRedirects, response) -> str | None:
    """What the server publishes as the file's SHA-256: the redirect's header, else the
    response's own."""
    return redirects.published or _sha256_header(getattr(response, "headers", None))


def download(
    url: str, dest, sha256: str | None = None, progress: bool = True, timeout: float = 60.0
) -> Path:
    """Fetch ``url`` to ``dest`` (see module docstring); returns ``dest``."""
    return download_checked(url, dest, sha256, progress, timeout)[0]


def download_checked(
    url: str, dest, sha256: str | None = None, progress: bool = True, timeout: float = 60.0
) -> tuple[Path, str]:
    """`download`, also saying in words which SHA-256 the file was checked against."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    redirects = _SumKeepingRedirects()
    try:
        response = urllib.request.build_opener(redirects).open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing past what we have: the .part is complete
            response = None
        else:
            raise CalbenchError(f"Cannot fetch {url}: HTTP {exc.code} {exc.reason}.") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CalbenchError(
            f"Cannot reach {url} ({reason}). `calbench data fetch` needs a connected machine; "
            f"alternatively copy the file to {dest} yourself and run `calbench data verify`."
        ) from None
    expected, by = sha256, "the registry expects"
    if response is not None and expected is None:
        expected, by = published_sha256(redirects, response), "its server publishes"
    if response is not None:
        _write_response(response, part, have, dest.name, progress)
    digest = sha256_of(part)
    if expected and digest != expected:
        part.unlink()
        raise _refuse(dest.name, digest, expected, url, by)
    os.replace(part, dest)
    record_checksum(dest.parent, dest.name, digest)
    if not expected:
        return dest, "no SHA-256 published to verify against"
    return dest, "SHA-256 verified" + ("" if sha256 else " against the one its server publishes")


def _write_response(response, part: Path, have: int, name: str, progress: bool) -> None:
    """The response's bytes into ``part``, after the ``have`` bytes already there where the
    server resumed (206), else from the start; a download cut short is refused."""
    with response:
        resumed = have and getattr(response, "status", None) == 206
        if not resumed:
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        with (
            open(part, "ab" if resumed else "wb") as out,
            tqdm(
                total=total,
                initial=have,
                unit="B",
                unit_scale=True,
                disable=not progress,
                desc=name,
            ) as bar,
        ):
            for block in iter(lambda: response.read(_BLOCK), b""):
                out.write(block)
                bar.update(len(block))
    got = part.stat().st_size
    if total is not None and got < total:
        raise CalbenchError(
            f"Download of {name} stopped at {got} of {total} bytes; run the fetch "
            "again to resume it."
        )
