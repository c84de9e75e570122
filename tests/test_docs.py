"""The documentation site builds without a warning, and its reference pages list what the
registries hold (so a method added as one class and one YAML appears on its own)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if shutil.which("mkdocs") is None and not _importable("mkdocs"):
        pytest.skip("mkdocs is not installed (pip install 'calbench[docs]'; make install does)")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))


def test_the_reference_lists_every_method_metric_and_data_set(site):
    from calbench.listing import catalogue

    for kind, page in (("methods", "methods"), ("metrics", "metrics"), ("datasets", "datasets")):
        text = _text(site / "reference" / page / "index.html")
        names = [entry["name"] for entry in catalogue(kind)]
        assert f"{len(names)} {kind}, from calbench list {kind}" in text
        missing = [n for n in names if f" {n} " not in text]
        assert not missing, f"{kind} missing from the reference: {missing[:5]}"


def test_the_api_page_renders_the_public_names_docstrings(site):
    text = _text(site / "reference" / "api" / "index.html")
    for name in ("load_dataset", "make_calibrator", "confidence_ece", "kde_ece"):
        assert name in text
    assert "Load a data set by loader name" in text  # load_dataset's own docstring
