"""MkDocs hook: the reference pages' catalogues generated from calbench's registries.

A line ``<!-- calbench-list KIND -->`` in a page becomes the table ``calbench list KIND``
prints (methods, calibrators, metrics, datasets, presets, tables), so the reference cannot
drift from the code: a method added as one class and one YAML appears on its own. A line
``<!-- calbench-pack NAME -->`` becomes the paper pack's page: its ``README.md`` and what the
pack holds (presets, methods, procedure twins, published tables, claims). Each pack's page
(``papers/NAME.md``) and its entry under "Papers" in the navigation are made here, from the
packs found by looking, so a new pack needs no edit to ``mkdocs.yml``. A line
``<!-- calbench-readme HEADING -->`` becomes the README's section of that heading, so the
set-up and the tour have one source.
"""

from __future__ import annotations

import re

_MARK = re.compile(r"^<!-- calbench-list (\w+) -->$", re.MULTILINE)
_PACK = re.compile(r"^<!-- calbench-pack (\w+) -->$", re.MULTILINE)
_README = re.compile(r"^<!-- calbench-readme (.+) -->$", re.MULTILINE)


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(kind: str) -> str:
    from calbench.listing import catalogue

    entries = catalogue(kind)
    if not entries:
        return f"*(no {kind})*"
    columns = list(entries[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for entry in entries:
        row = [f"`{entry[c]}`" if c == "name" else _cell(entry[c]) for c in columns]
        lines.append("| " + " | ".join(row) + " |")
    return f"{len(entries)} {kind}, from `calbench list {kind}`:\n\n" + "\n".join(lines)


#: The kinds of part a pack's Python brings (`calbench.packs`), as its page names them.
PART_KINDS = {
    "CALIBRATORS": "Procedure twins",
    "METRICS": "Metrics",
    "LOADERS": "Data-set loaders",
    "PROTOCOLS": "Protocols",
    "VIEWS": "Data-set views (dataset config keys)",
    "IMPORTERS": "Published-results importers (calbench import)",
    "LOSS_DRAWS": "Loss-matrix draws (average_loss_gap's draws)",
    "KUIPER_ARITHMETIC": "Kuiper arithmetic (kuiper_error's arithmetic)",
}


def _pack_page(name: str) -> str:
    from calbench.listing import catalogue
    from calbench.packs import paper_packs
    from calbench.reproduce.published import not_reproducible, published

    pack = paper_packs()[name]
    own = {
        group: sorted(p.stem for p in pack.conf_folder(group).glob("*.yaml"))
        for group in ("experiment", "method", "table", "metrics", "dataset", "protocol")
    }
    described = {entry["name"]: entry["description"] for entry in catalogue("presets")}
    numbers = published(averages=True)
    numbers = numbers[numbers["pack"] == name]
    lines = [
        pack.folder.joinpath("README.md").read_text().rstrip(),
        "",
        "## What the pack holds",
        "",
        f"`calbench/papers/{name}/`. Cite: {pack.meta.get('citation', pack.title)}",
        "",
        "| preset | what it runs |",
        "|---|---|",
    ]
    lines += [f"| `{p}` | {_cell(described[p])} |" for p in own["experiment"]]
    twins = pack.calibrators()
    if twins:
        lines += [
            "",
            "Procedure twins (registered calibrators): "
            + ", ".join(f"`{n}` ({cls.__name__})" for n, (cls, _) in twins.items())
            + ".",
        ]
    lines += [
        "",
        "Method variants: " + ", ".join(f"`{m}`" for m in own["method"]) + "."
        if own["method"]
        else "",
        "",
    ]
    if own["table"]:
        lines += ["Table layouts: " + ", ".join(f"`{t}`" for t in own["table"]) + ".", ""]
    if own["dataset"]:
        lines += ["Data sets: " + ", ".join(f"`{d}`" for d in own["dataset"]) + ".", ""]
    for kind, what in PART_KINDS.items():
        parts = pack.parts(kind)
        if parts and kind != "CALIBRATORS":
            lines += [f"{what}: " + ", ".join(f"`{n}`" for n in parts) + ".", ""]
    if len(numbers):
        counts = numbers.groupby("table").size()
        lines += ["| published table | printed numbers |", "|---|---|"]
        lines += [f"| {t} | {n} |" for t, n in counts.items()]
    gone = not_reproducible()
    for _, row in gone[gone["paper"] == pack.paper].iterrows():
        lines += ["", f"*Not rerun: {row['table']}.* {row['reason']}"]
    return "\n".join(lines) + "\n"


def readme_section(heading: str) -> str:
    """The README's ``## HEADING...`` section (to the next ``## ``), links made absolute
    where they point into the repository's ``docs/``."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else None].strip()
    return re.sub(r"\]\(docs/", "](", section)


def _pack_pages() -> dict[str, str]:
    """Page path -> navigation title (its ``pack.yaml`` title up to the comma), per pack."""
    from calbench.packs import paper_packs

    return {f"papers/{name}.md": pack.title.split(",")[0] for name, pack in paper_packs().items()}


def on_config(config):
    for section in config["nav"]:
        if isinstance(section, dict) and "Papers" in section:
            index = [e for e in section["Papers"] if "papers/index.md" in e.values()]
            section["Papers"] = index + [{t: page} for page, t in _pack_pages().items()]
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    for page in _pack_pages():
        name = page[len("papers/") : -len(".md")]
        files.append(File.generated(config, page, content=f"<!-- calbench-pack {name} -->\n"))
    return files


def on_page_markdown(markdown, page, config, files):
    markdown = _README.sub(lambda m: readme_section(m.group(1)), markdown)
    markdown = _PACK.sub(lambda m: _pack_page(m.group(1)), markdown)
    return _MARK.sub(lambda m: _table(m.group(1)), markdown)
