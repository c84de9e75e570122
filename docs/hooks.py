"""MkDocs hook: the reference pages' catalogues generated from calbench's registries.

A line ``<!-- calbench-list KIND -->`` in a page becomes the table ``calbench list KIND``
prints (methods, calibrators, metrics, datasets, presets, tables), so the reference cannot
drift from the code: a method added as one class and one YAML appears on its own.
"""

from __future__ import annotations

import re

_MARK = re.compile(r"^<!-- calbench-list (\w+) -->$", re.MULTILINE)


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


def on_page_markdown(markdown, page, config, files):
    return _MARK.sub(lambda m: _table(m.group(1)), markdown)
