"""A report built from a store whose names are hostile (script tags, event attributes,
Markdown links, quotes, a right-to-left override, a table's '|'): `calbench run` refuses
such names, but a store can come from elsewhere (an older calbench, a colleague, a hand
edit), and a page is something people send to each other. Nothing in it may run, every
in-page link must resolve, and the Markdown report's rows must stay whole."""

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from calbench.results.store import ResultStore
from calbench.runner.job import run_job
from calbench.yaml_text import dump_yaml
from tests.cli.test_cli import calbench
from tests.report.test_html import write_two_networks
from tests.runner.test_runner import plan

HOSTILE_METHODS = {
    "uncal": '<script>alert("uncal")</script>',
    "ts": "<img src=x onerror=alert('ts')>",
    "vs": "[vs](javascript:alert('vs'))",
    "histbin_width": '" onmouseover="alert(\'hb\')" x="\u202eevil|name',
}
HOSTILE_DATA = {"netA": "<svg onload=alert('netA')>", "netB": "netB_[x](javascript:alert(2))"}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    write_two_networks(folder, classes=3, rows=600)
    results = folder / "results"
    for name in ("netA", "netB"):
        for method in HOSTILE_METHODS:
            run_job(
                plan(
                    "experiment_name=mine",
                    "dataset=npz",
                    f"dataset.path={folder}/{name}.npz",
                    f"method={method}",
                    "protocol.inner_folds=2",
                    f"results_dir={results}",
                )
            )
    store = ResultStore(results)
    for config_file in sorted(store.root.glob("*.yaml")):  # rename every label, as stored
        cell_hash = config_file.stem
        rows = store.cell(cell_hash)
        rows["method"] = rows["method"].map(HOSTILE_METHODS)
        rows["dataset"] = rows["dataset"].map(HOSTILE_DATA)
        config = store.config(cell_hash)
        config["method"]["name"] = HOSTILE_METHODS[config["method"]["name"]]
        stem = Path(config["dataset"]["path"]).stem
        config["dataset"]["path"] = f"{folder}/{HOSTILE_DATA[stem]}.npz"
        digest = store.write_config(cell_hash, dump_yaml(config))
        stored_at = rows["stored_at"].iat[0]
        store.replace_rows(
            cell_hash, rows.drop(columns="stored_at"), stored_at, config_sha256=digest
        )
    out = calbench("report", "mine", "--html", "--results-dir", str(results))
    assert out.returncode == 0, out.stderr
    reports = results / "reports"
    return {
        "html": (reports / "mine.html").read_text(),
        "md": (reports / "mine.md").read_text(),
        "path": reports / "mine.html",
    }


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.scripts, self.text = [], [], []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def _parsed(text) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    return parser


def test_no_name_becomes_markup_in_the_page(hostile):
    page = _parsed(hostile["html"])
    assert len([t for t, _ in page.tags if t == "script"]) == 1  # the table-sorting script
    assert "alert" not in "".join(page.scripts)
    assert not [t for t, _ in page.tags if t in ("img", "svg") and not _is_figure(_)]
    handlers = [(t, a) for t, attrs in page.tags for a in attrs if a.startswith("on")]
    assert handlers == []
    hrefs = [a.get("href", "") for t, a in page.tags if t == "a"]
    assert not [h for h in hrefs if ":" in h.split("/")[0]]  # no scheme: javascript:, http:
    ids = {a["id"] for _, a in page.tags if "id" in a}
    assert [h for h in hrefs if h.startswith("#") and h[1:] not in ids] == []
    shown = "".join(page.text)
    for name in [*HOSTILE_METHODS.values(), *HOSTILE_DATA.values()]:
        visible = name.replace("\u202e", "\\u202e")
        assert visible in shown or name in shown, name  # shown as the characters it is


def _is_figure(attrs) -> bool:
    return attrs.get("src", "").startswith("data:image/png;base64,")


def test_the_markdown_report_keeps_its_rows_and_links_whole(hostile):
    text = hostile["md"]
    assert "<script>" not in text and "<img" not in text and "<svg" not in text
    assert "\\[vs](javascript:" in text  # its '[' escaped: no link can open
    assert text.count("[vs](javascript:") == text.count("\\[vs](javascript:")
    assert "\u202e" not in text
    for table in re.findall(r"((?:^\|.*\|\n)+)", text, flags=re.M):
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}
        assert len(widths) == 1, table  # an escaped '|' splits no row


def test_the_markdown_report_renders_to_the_same_safe_html(hostile):
    from calbench.report.html_markdown import markdown_html

    page = _parsed(markdown_html(hostile["md"]))
    assert not [t for t, _ in page.tags if t in ("script", "img", "svg")]
    assert not [h for t, a in page.tags if t == "a" for h in [a.get("href", "")] if ":" in h]


@pytest.mark.slow  # about 5 s: headless Chromium
@pytest.mark.skipif(
    shutil.which("chromium") is None or shutil.which("chromedriver") is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)
def test_nothing_runs_when_the_page_opens(hostile):
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        record = (
            "window.__alerts = [];"
            "for (const f of ['alert', 'confirm', 'prompt'])"
            "  window[f] = m => { window.__alerts.push(f + ':' + m); };"
        )
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": record})
        driver.get(hostile["path"].as_uri())
        for link in driver.find_elements("css selector", "a"):  # hover and click every link
            driver.execute_script(
                "arguments[0].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));"
                "arguments[0].click();",
                link,
            )
        driver.get(hostile["path"].as_uri())  # a click may have moved to an anchor
        alerts = driver.execute_script("return window.__alerts")
        assert alerts == []
        unresolved = driver.execute_script(
            "return [...document.querySelectorAll('a[href^=\"#\"]')]"
            ".filter(a => !document.getElementById(decodeURIComponent("
            "a.getAttribute('href').slice(1)))).map(a => a.getAttribute('href'))"
        )
        assert unresolved == []
        handlers = driver.execute_script(
            "return [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]"
            ".filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name))"
        )
        assert handlers == []
        assert json.dumps(driver.title).count("script") == 0
    finally:
        driver.quit()
