"""Downloads against a local HTTP server (never the internet), the registry, pickle trust."""

import hashlib
import pickle
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from calbench.data import load_dataset
from calbench.data.cli import list_sets
from calbench.data.fetch import download, recorded_checksums
from calbench.errors import CalbenchError

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class Handler(BaseHTTPRequestHandler):
    honour_range = True
    truncate_once = False

    def log_message(self, *args):
        pass

    def do_GET(self):
        start = 0
        header = self.headers.get("Range")
        if header and type(self).honour_range:
            start = int(header.split("=")[1].rstrip("-"))
            self.send_response(206)
        else:
            self.send_response(200)
        body = PAYLOAD[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
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
    with pytest.raises(CalbenchError, match="Refused x.bin: its SHA-256 is"):
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


def test_pickles_load_only_when_known_or_trusted(tmp_path, rng):
    _pickle(tmp_path / "mine.p", rng)
    with pytest.raises(CalbenchError, match="Refusing to unpickle .* dataset.trusted=true"):
        load_dataset("kull_pickle", path=tmp_path / "mine.p")
    assert load_dataset("kull_pickle", path=tmp_path / "mine.p", trusted=True).n_classes == 3
    fetched = tmp_path / "fetched"
    download((tmp_path / "mine.p").as_uri(), fetched / "mine.p", progress=False)
    assert load_dataset("kull_pickle", path=fetched / "mine.p").n_classes == 3


def test_data_list_on_a_fresh_machine(tmp_path):
    rows = {r[0]: r for r in list_sets(tmp_path)}
    assert rows["c10_densenet40"][5] == "absent"
    assert rows["c10_densenet40"][6] == "calbench data fetch c10_densenet40"
    assert "valk_real" in rows["c10_densenet40"][7]
    assert rows["synthetic_dirichlet"][5] == "available"
    assert rows["ham10000"][6].startswith("user-supplied")
    assert {"imgnet_resnet152", "svhn_resnet152_SD", "c100_lenet5"} <= set(rows)
