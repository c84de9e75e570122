"""The HTML report on a small store of a user's own two networks (`calbench.report.html`):
self-contained, every link resolving, each per-task number the stored one of the cell it
links to, the small-sample caveat, sortable tables that sort by the numbers shown; and, in
the slow suite, the same page opened and clicked in headless Chromium."""

import base64
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest


def calbench(*args):
    return subprocess.run(
        [sys.executable, "-m", "calbench.cli", *args], capture_output=True, text=True, timeout=600
    )


def write_two_networks(folder, classes: int, rows: int) -> None:
    """``netA.npz`` and ``netB.npz``: two made-up over-confident networks' logits."""
    for seed, name in ((0, "netA"), (1, "netB")):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, classes, rows)
        z = rng.normal(size=(rows, classes))
        z[np.arange(rows), y] += 2.0
        np.savez(folder / f"{name}.npz", logits=2 * z, y=y)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """Two networks of the user's own (npz files), four methods, one named experiment; its
    Markdown and HTML reports."""
    folder = tmp_path_factory.mktemp("report")
    write_two_networks(folder, classes=4, rows=800)
    results = folder / "results"
    out = calbench(
        "run",
        "-m",
        "experiment_name=mine",
        "dataset=npz",
        f"dataset.path={folder}/netA.npz,{folder}/netB.npz",
        "method=uncal,ts,vs,histbin_width",
        "protocol.inner_folds=3",
        f"results_dir={results}",
    )
    assert out.returncode == 0, out.stderr
    out = calbench("report", "mine", "--html", "--results-dir", str(results))
    assert out.returncode == 0, out.stderr
    stored = pd.concat(pd.read_csv(f) for f in (results / "store").glob("*.csv"))
    return {
        "html": (results / "reports" / "mine.html").read_text(),
        "md": (results / "reports" / "mine.md").read_text(),
        "path": results / "reports" / "mine.html",
        "stored": stored,
    }


class _Elements(HTMLParser):
    """Every tag's attributes, in order."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _elements(text):
    parser = _Elements()
    parser.feed(text)
    return parser.tags


def test_the_page_needs_no_network(page):
    tags = _elements(page["html"])
    assert not [
        a
        for t, a in tags
        if t in ("script", "img", "link", "iframe")
        and "src" in a
        and not a["src"].startswith("data:")
    ]
    assert not [a for t, a in tags if t == "link"]  # styles inline
    images = [a["src"] for t, a in tags if t == "img"]
    assert images  # the leaderboards' win-rate figures at least
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_link_within_the_page_resolves(page):
    tags = _elements(page["html"])
    ids = {a["id"] for _, a in tags if "id" in a}
    targets = [a["href"][1:] for t, a in tags if t == "a" and a.get("href", "").startswith("#")]
    assert len(targets) > 20
    assert not [t for t in targets if t not in ids]


def test_each_per_task_number_is_its_cells_stored_value(page):
    """The per-task table of the log-loss leaderboard: the best method is the stored
    minimum, and each value links to a cell whose stored log-loss it prints."""
    stored = page["stored"]
    values = stored[stored["metric"] == "log_loss"].set_index("config_hash")["value"]
    section = page["html"].split('id="leaderboard-log_loss"')[1].split('id="leaderboard-')[0]
    linked = re.findall(r'<a href="#cell-([0-9a-f]+)">([0-9.]+)</a>', section)
    assert len(linked) == 4  # best and TS on each of the two tasks
    for cell_hash, printed in linked:
        assert float(printed) == pytest.approx(values[cell_hash], abs=5e-5)
    per_task = stored[stored["metric"] == "log_loss"].pivot_table(
        index="dataset", columns="method", values="value"
    )
    for task, best in per_task.idxmin(axis=1).items():
        assert re.search(rf"<td>{task}</td><td><a href=\"#method-{best}\">{best}</a>", section)


def test_few_tasks_say_their_intervals_cannot_be_trusted(page):
    assert page["html"].count('class="caveat">Only 2 block(s) of tasks') == 2  # two metrics
    assert "Only 2 block(s) of tasks: the intervals cannot be trusted" in page["md"]


def test_tables_sort_by_the_numbers_they_show(page):
    cells = re.findall(r'<td class="num" data-sort="([^"]+)">([^<]*)</td>', page["html"])
    assert len(cells) > 50
    for sort, shown in cells:
        number = re.match(r"[+-]?[0-9.]+(e[+-]?\d+)?", shown.strip())
        if number and " / " not in shown:  # "better / worse than TS" sorts by the net
            assert float(sort) == pytest.approx(float(number.group(0)), rel=1e-2, abs=1e-3)
    assert page["html"].count('<table class="sortable">') >= 6


def test_the_set_up_names_the_files_methods_grid_and_choices(page):
    text = page["html"]
    assert "<code>netA.npz</code> (npz)" in text and "<code>netB.npz</code> (npz)" in text
    chosen = page["stored"].query("method == 'histbin_width'")["params"].map(json.loads)
    for point in chosen:
        assert f"n_bins = {point['n_bins']}" in text
    assert "n_bins: 5, 10, 15, 20, 25, 30" in text


def test_the_markdown_report_gains_the_leaderboards_and_their_figures(page):
    assert "## Leaderboards" in page["md"]
    assert "![mine_log_loss_winrate](../leaderboards/mine_log_loss_winrate.png)" in page["md"]


@pytest.mark.slow  # about 10 s: headless Chromium
@pytest.mark.skipif(
    shutil.which("chromium") is None or shutil.which("chromedriver") is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)
def test_the_page_in_a_real_browser(page, tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(page["path"].as_uri())
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors
        broken = driver.execute_script(
            "return [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length"
        )
        assert broken == 0 and driver.execute_script("return document.images.length") > 0
        unresolved = driver.execute_script(
            "return [...document.querySelectorAll('a[href^=\"#\"]')]"
            ".filter(a => !document.getElementById(a.getAttribute('href').slice(1))).length"
        )
        assert unresolved == 0
        # Sorting: a click on the leaderboard's "mean rank" reorders its rows by it.
        table = "document.querySelector('#leaderboard-log_loss ~ table')"
        column = driver.execute_script(
            f"return [...{table}.tHead.rows[0].cells].findIndex(c => c.textContent === 'mean rank')"
        )
        ranks = f"return [...{table}.tBodies[0].rows].map(r => +r.cells[{column}].dataset.sort)"
        before = driver.execute_script(ranks)
        header = driver.execute_script(f"return {table}.tHead.rows[0].cells[{column}]")
        for click, expected in ((1, sorted(before, reverse=True)), (2, sorted(before))):
            header.click()
            driver.implicitly_wait(0.2)
            driver.execute_script("return new Promise(r => setTimeout(r, 50))")
            assert driver.execute_script(ranks) == expected, click
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        for width in (1280, 1400):  # wide tables scroll in their own box, never the page
            driver.set_window_size(width, 1000)
            page_width = driver.execute_script("return document.documentElement.scrollWidth")
            view = driver.execute_script("return document.documentElement.clientWidth")
            assert page_width <= view, (width, page_width, view)
        driver.save_screenshot(str(tmp_path / "report.png"))
        assert (tmp_path / "report.png").stat().st_size > 10_000
    finally:
        driver.quit()


def test_the_page_leads_with_the_leaderboards_and_folds_its_tables(page):
    text = page["html"]
    assert text.index('<section id="leaderboards">') < text.index('<section id="setup">')
    tables = text.split('<section id="tables">')[1].split("</section>")[0]
    summaries = re.findall(r"<details( open)?><summary>([^<]+)</summary>", tables)
    assert len(summaries) >= 10  # a table per stored metric, each under its name
    assert [name for opened, name in summaries if opened] == ["mine_log_loss"]


def test_every_leaderboard_column_is_explained_where_it_appears(page):
    """Each column head of a leaderboard carries its meaning on hover, and the table is
    followed by the same sentences under "What each column means"."""
    text = page["html"]
    boards = text.split('<section id="leaderboards">')[1].split("</section>")[0]
    heads = [
        (attrs.get("title"), tag)
        for tag, attrs in _elements(boards.split("<tbody>")[0])
        if tag == "th"
    ]
    assert len(heads) >= 8 and all(title for title, _ in heads)
    legend = boards.split("What each column means")[1].split("</details>")[0]
    for name in ("mean rank", "win rate [95% CI]", "blocks to tell from #1", "median fit (s)"):
        assert f"<dt>{name}</dt>" in legend
    assert "how many data sets it would take" in legend
