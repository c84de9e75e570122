"""The README's tour, run from the README's own text: every command of its table, in order,
in an empty folder, as a newcomer types them (the first writes the two models' files the
others read). `benchmarks/bench_tour.py` times the same commands. In the slow suite
(`make test-tour`), which `.ci/run` runs after the quick one."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def tour_commands(text: str | None = None) -> list[str]:
    """The commands of the README's tour table, in order (``calbench ...``, as printed)."""
    text = README.read_text() if text is None else text
    section = text.split("## A tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(calbench [^`]+)` \|", section, flags=re.M)


@pytest.mark.slow  # about a minute (its figures alone 22 s): `make test-tour`, run by CI
def test_the_tour_runs_as_printed_in_an_empty_folder(tmp_path):
    commands = tour_commands()
    assert commands[0] == "calbench data example" and len(commands) >= 10
    for command in commands:
        args = shlex.split(command.replace("\\|", "|"))[1:]
        done = subprocess.run(
            [sys.executable, "-m", "calbench.cli", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{command}:\n{done.stderr[-2000:]}"
    page = (tmp_path / "mine" / "reports" / "default.html").read_text()
    assert page.count('src="data:image/png;base64,') >= 4  # its figures, drawn for this store
    assert "None could be drawn" not in page
    assert "model_a</td><td" in page.replace('<td class="num"', "<td")
