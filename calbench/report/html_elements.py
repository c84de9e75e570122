"""The HTML report's small pieces: a sortable table's head, its cells (numbers sort by
their values), an anchor's slug and an inline figure."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import numpy as np

from calbench.markup import html_text


def open_table(head, titles=None) -> str:
    """A sortable table's head; ``titles``: a sentence per column, shown on hover."""
    titles = titles or [""] * len(head)
    ths = "".join(
        f'<th title="{html.escape(t, quote=True)}">{html_text(str(h))}</th>'
        if t
        else f"<th>{html_text(str(h))}</th>"
        for h, t in zip(head, titles, strict=True)
    )
    return f'<table class="sortable"><thead><tr>{ths}</tr></thead><tbody>'


def td(value, sort=None) -> str:
    text = "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)
    if sort is None or (isinstance(sort, float) and np.isnan(sort)):
        return f"<td>{html_text(text)}</td>"
    sort = 1e300 if np.isinf(sort) else float(sort)
    return f'<td class="num" data-sort="{sort!r}">{html_text(text)}</td>'


def num_td(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "<td></td>"
    if fmt.endswith("d}"):
        value = int(value)
    return td(fmt.format(value), float(value))


def slug(text: str) -> str:
    """An anchor for a name, one for each name: letters, digits, '_' and '-' as they are,
    any other character as its code between dots (``a.b`` is ``a.2e.b``)."""
    return re.sub(r"[^A-Za-z0-9_-]", lambda m: f".{ord(m.group()):x}.", str(text)) or "."


def figure(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    name = html_text(Path(path).stem)
    return (
        f'<figure id="figure-{slug(Path(path).stem)}"><img alt="{name}" '
        f'src="data:image/png;base64,{data}"><figcaption>{name}</figcaption></figure>'
    )
