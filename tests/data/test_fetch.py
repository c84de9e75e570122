"""Downloads against a local HTTP server (never the internet), the registry, pickle trust."""

import hashlib
import pickle
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from calbench.data import load_dataset
from calbench.data.fetch import download, recorded_checksums
from calbench.data.install import fetch, list_sets, verify
from calbench.data.registry import registered_sets
from calbench.errors import CalbenchError

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


def _ranged_payload(handler, honour_range=True) -> bytes:
    """Answer 206 with the rest of `PAYLOAD` from a ``Range`` header (200 and all of it
    without one, or where ranges are ignored), headers sent; returns the body to write."""
    start = 0
    header = handler.headers.get("Range")
    if header and honour_range:
        start = int(header.split("=")[1].rstrip("-"))
        handler.send_response(206)
    else:
        handler.send_response(200)
    body = PAYLOAD[start:]
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    return body


class Handler(BaseHTTPRequestHandler):
    honour_range = True
    truncate_once = False

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = _ranged_payload(self, type(self).honour_range)
        if type(self).truncate_once:
            type(self).truncate_once = False
            self.wfile.write(body[: len(body) // 3])  # the connection drops mid-way
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    Handler.honour_range, Handler.truncate_once = True, False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/file.bin"
    httpd.shutdown()


def test_download_verifies_records_and_renames(server, tmp_path):
    path = download(server, tmp_path / "x.bin", DIGEST, progress=False)
    assert path.read_bytes() == PAYLOAD
    assert not (tmp_path / "x.bin.part").exists()
    assert recorded_checksums(tmp_path)["x.bin"] == DIGEST


def test_checksum_mismatch_is_refused(server, tmp_path):
    with pytest.raises(CalbenchError, match="Refused x.bin from .*: its SHA-256 is"):
        download(server, tmp_path / "x.bin", "0" * 64, progress=False)
    assert not (tmp_path / "x.bin").exists() and not (tmp_path / "x.bin.part").exists()


def test_truncated_download_resumes(server, tmp_path):
    Handler.truncate_once = True
    with pytest.raises(CalbenchError, match="stopped at .* bytes; run the fetch again"):
        download(server, tmp_path / "x.bin", DIGEST, progress=False)
    assert not (tmp_path / "x.bin").exists()
    assert 0 < (tmp_path / "x.bin.part").stat().st_size < len(PAYLOAD)
    download(server, tmp_path / "x.bin", DIGEST, progress=False)
    assert (tmp_path / "x.bin").read_bytes() == PAYLOAD


def test_server_ignoring_range_restarts(server, tmp_path):
    (tmp_path / "x.bin.part").write_bytes(b"garbage that is not the start")
    Handler.honour_range = False
    download(server, tmp_path / "x.bin", DIGEST, progress=False)
    assert (tmp_path / "x.bin").read_bytes() == PAYLOAD


def test_file_url_and_offline_message(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(PAYLOAD)
    download(src.as_uri(), tmp_path / "out" / "y.bin", DIGEST, progress=False)
    assert (tmp_path / "out" / "y.bin").read_bytes() == PAYLOAD
    with pytest.raises(CalbenchError, match="needs a connected machine"):
        download("http://127.0.0.1:9/nothing", tmp_path / "z.bin", progress=False, timeout=5)


def _pickle(path, rng):
    z = rng.normal(size=(20, 3))
    y = np.arange(20) % 3
    with open(path, "wb") as f:
        pickle.dump(((z[:10], y[:10]), (z[10:], y[10:])), f)


class _Payload:
    """Unpickling this runs code: it creates the file named ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("flag", ["no", "off", "false", "False", "0", 0, 1, None, "true"])
def test_a_trust_flag_that_is_not_a_boolean_opens_nothing(tmp_path, flag):
    """Only the booleans true and false are read as the flag: "no", "off" or an environment
    interpolation's "false" are truthy strings, and once unpickled the file's code ran."""
    marker = tmp_path / "code_ran"
    with open(tmp_path / "evil.p", "wb") as f:
        pickle.dump(_Payload(marker), f)
    with pytest.raises(CalbenchError, match=r"dataset.trusted must be true or false"):
        load_dataset("kull_pickle", path=tmp_path / "evil.p", trusted=flag)
    assert not marker.exists()


def test_pickles_load_only_when_published_or_trusted(tmp_path, rng):
    _pickle(tmp_path / "mine.p", rng)
    with pytest.raises(CalbenchError, match="Refusing to unpickle .* dataset.trusted=true"):
        load_dataset("kull_pickle", path=tmp_path / "mine.p")
    assert load_dataset("kull_pickle", path=tmp_path / "mine.p", trusted=True).n_classes == 3
    # No trust on first use: a file calbench downloaded without a published sum stays refused.
    fetched = tmp_path / "fetched"
    download((tmp_path / "mine.p").as_uri(), fetched / "mine.p", progress=False)
    with pytest.raises(CalbenchError, match="not a published sum"):
        load_dataset("kull_pickle", path=fetched / "mine.p")


def test_registered_set_refuses_other_bytes(tmp_path, rng):
    """A registered set's file must be the published one, whatever else the registry knows."""
    _pickle(tmp_path / "probs_densenet40_c10_logits.p", rng)
    out = subprocess.run(
        [sys.executable, "-m", "calbench.cli", "run", "dataset=c10_densenet40"]
        + [f"data_dir={tmp_path}", f"results_dir={tmp_path}"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "not the published file's" in out.stderr and "calbench data fetch" in out.stderr
    assert any("differs from the published one" in problem for problem in verify(tmp_path))
    rows = {r[0]: r for r in list_sets(tmp_path)}
    assert rows["c10_densenet40"][5] == "CHECKSUM MISMATCH"


def test_fetch_from_a_local_folder_verifies_and_installs(tmp_path, rng, capsys):
    source, data = tmp_path / "mirror", tmp_path / "data"
    source.mkdir()
    _pickle(source / "probs_densenet40_c10_logits.p", rng)  # same name, other bytes
    with pytest.raises(CalbenchError, match="Refused probs_densenet40_c10_logits.p from .*mirror"):
        fetch(["c10_densenet40"], data, source_dir=source)
    assert not (data / "probs_densenet40_c10_logits.p").exists()
    with pytest.raises(CalbenchError, match="does not exist"):
        fetch(["c10_resnet110"], data, source_dir=source)
    with pytest.raises(CalbenchError, match="no such folder"):
        fetch(["all"], data, source_dir=tmp_path / "nowhere")


def test_fetch_tries_each_source_in_turn(server, tmp_path, monkeypatch):
    from calbench.data import install as data_cli
    from calbench.data.registry import RegisteredFile, RegisteredSet

    dead = "http://127.0.0.1:9/absent"  # the discard port: refused at once
    entry = RegisteredFile(name="x.bin", sha256=DIGEST, bytes=len(PAYLOAD), urls=[dead, server])
    fake = {"x": RegisteredSet("x", "logits", 3, 1, 1, [], [entry])}
    monkeypatch.setattr(data_cli, "registered_sets", lambda: fake)
    data_cli.fetch(["x"], tmp_path, progress=False)
    assert (tmp_path / "x.bin").read_bytes() == PAYLOAD


def test_published_logits_have_their_lfs_checksums():
    """Every pickle of NN_calibration's LFS store is registered with its sum, size and both
    sources (the sums are the LFS object ids, listed in shared/data/published_logits.tsv)."""
    files = {f.name: f for s in registered_sets().values() for f in s.files}
    published = files["probs_densenet40_c10_logits.p"]
    assert published.sha256 == ("4d23b6ba266f62fc3dddb702dc74b7d629f7a6615b9e304904cee93a6992c1d5")
    assert published.bytes == 720341
    assert any("media.githubusercontent.com" in u for u in published.urls)
    assert any("caltrain_data" in u for u in published.urls)
    with_sums = [f for f in files.values() if f.name.startswith("probs_") and f.sha256]
    assert len(with_sums) == 13  # the 11 of the LFS store, and ImageNet's two from its history


def test_data_list_on_a_fresh_machine(tmp_path):
    rows = {r[0]: r for r in list_sets(tmp_path)}
    assert rows["c10_densenet40"][5] == "absent"
    assert rows["c10_densenet40"][6] == "4d23b6ba266f"
    assert rows["c10_densenet40"][7] == "calbench data fetch c10_densenet40"
    assert "valk_real" in rows["c10_densenet40"][8]
    assert rows["synthetic_dirichlet"][5] == "available"
    assert rows["ham10000"][7].startswith("user-supplied")
    assert {"imgnet_resnet152", "svhn_resnet152_SD", "c100_lenet5"} <= set(rows)


def test_published_densenet_installs_from_the_shared_folder(published_logits):
    """The real file, installed by `data fetch all --from`, verifies and loads as registered."""
    rows = {r[0]: r for r in list_sets(published_logits)}
    assert rows["c10_densenet40"][5] == "present"
    sha = registered_sets()["c10_densenet40"].files[0].sha256
    ds = load_dataset(
        "kull_pickle", path=published_logits / "probs_densenet40_c10_logits.p", sha256=sha
    )
    assert ds.logits_cal.shape == (5000, 10) and ds.logits_test.shape == (10000, 10)


def test_the_registry_knows_every_published_checksum():
    """Every NN_calibration pickle in shared/data/published_logits.tsv (ImageNet's, removed
    from the repository, included) is registered with that SHA-256 and size."""
    from conftest import SHARED_DATA

    from calbench.data.registry import registered_sets

    listing = SHARED_DATA / "published_logits.tsv"
    if not listing.is_file():
        pytest.skip(f"{listing} is absent (a user's clone)")
    lines = [line for line in listing.read_text().splitlines() if not line.startswith("#")]
    published = {
        name: (sha, int(size)) for name, sha, size in (line.split("\t") for line in lines[1:])
    }
    registered = {f.name: (f.sha256, f.bytes) for s in registered_sets().values() for f in s.files}
    # the birds logits belong to no paper calbench reproduces
    wanted = {n: v for n, v in published.items() if "birds" not in n}
    assert {n: registered.get(n) for n in wanted} == wanted


def test_the_data_list_fits_a_wide_terminal(tmp_path):
    """Without --wide: seven columns and a preset count, not every preset's name (lines
    were 614 characters wide)."""
    from tabulate import tabulate

    from calbench.data.install import COMPACT_HEADERS, compact, experiments_text

    rows, headers = compact(list_sets(tmp_path))
    assert headers == COMPACT_HEADERS
    assert max(len(line) for line in tabulate(rows, headers=headers).splitlines()) < 220
    names = ["kull_deepnet_procedure", "valk_real", "gupta_ks", "hoki_ece"]
    assert experiments_text(names) == "gupta_ks, hoki_ece +2"
    assert experiments_text([]) == "-"


class HubHandler(BaseHTTPRequestHandler):
    """The Hugging Face hub's way: ``/resolve`` answers 302 with the LFS file's SHA-256 in
    ``X-Linked-Etag``; the storage it redirects to serves the bytes (and ranges)."""

    published = DIGEST

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/resolve":
            self.send_response(302)
            self.send_header("Location", "/blob")
            self.send_header("X-Linked-Etag", f'"{type(self).published}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.wfile.write(_ranged_payload(self))


@pytest.fixture
def hub():
    HubHandler.published = DIGEST
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), HubHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/resolve"
    httpd.shutdown()


def test_a_sum_the_server_publishes_is_checked_where_the_registry_has_none(hub, tmp_path):
    from calbench.data.fetch import download_checked

    path, check = download_checked(hub, tmp_path / "c.h5", None, progress=False)
    assert path.read_bytes() == PAYLOAD
    assert check == "SHA-256 verified against the one its server publishes"
    HubHandler.published = "f" * 64
    with pytest.raises(CalbenchError, match="its server publishes f{64}"):
        download_checked(hub, tmp_path / "d.h5", None, progress=False)
    assert not (tmp_path / "d.h5").exists() and not (tmp_path / "d.h5.part").exists()


def test_a_hub_download_resumes_through_the_redirect(hub, tmp_path):
    (tmp_path / "c.h5.part").write_bytes(PAYLOAD[:1000])
    assert download(hub, tmp_path / "c.h5", progress=False).read_bytes() == PAYLOAD


def test_without_any_sum_the_fetch_says_so(server, tmp_path):
    from calbench.data.fetch import download_checked

    _, check = download_checked(server, tmp_path / "x.bin", None, progress=False)
    assert check == "no SHA-256 published to verify against"
