"""Names written into Markdown (and so into the HTML page made from it) as text, never as
markup.

A method's name, a data set's name from a file stem or a CalArena file's name is the user's
text; a report is something people send to each other. So every name goes through
`md_text` where a Markdown line is written: ``<script>`` stays the characters it is,
``[x](javascript:...)`` stays brackets, a ``|`` cannot split a table row, and a right-to-left
override cannot turn the rest of the line around. `markdown_table` is tabulate's pipe table
with every label and text cell passed through it.
"""

from __future__ import annotations

import re
import unicodedata

import pandas as pd

# Markdown's punctuation that opens markup anywhere in a line: emphasis, code, a link or an
# image (none without its '['), a table cell, strike-through, an escape. A closer alone is
# text, so ']' stays as it is, and '_' is escaped only where it could open emphasis (not
# after a letter or digit, in Markdown and GFM alike): ``dir_odir`` and ``temperature_``
# stay as they are.
_MARKDOWN = re.compile(r"[\\`*\[|~]|(?<![^\W_])_")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _visible(char: str) -> str:
    """A control, format (bidi, zero-width) or separator character as its code."""
    if char in "\t\n\r":
        return " "
    return f"\\u{ord(char):04x}"  # its backslash escaped as every other one


def visible(text) -> str:
    """``text`` with its invisible and direction-changing characters (controls, bidi
    overrides, zero-width marks) written as their codes (``\\u202e``)."""
    return "".join(
        _visible(c) if unicodedata.category(c)[0] in "CZ" and c != " " else c for c in str(text)
    )


def html_text(text) -> str:
    """``text`` for an HTML page: `visible`, then escaped (``<``, ``>``, ``&``, quotes)."""
    import html

    return html.escape(visible(text))


def md_text(text) -> str:
    """``text`` as Markdown that shows exactly those characters (HTML's ``<``, ``>`` and
    ``&`` as entities, which Markdown passes through and every renderer shows as the
    character; invisible and direction-changing characters as their codes, `visible`)."""
    shown = "".join(_HTML.get(c, c) for c in visible(text))
    return _MARKDOWN.sub(lambda m: "\\" + m.group(0), shown)


def markdown_table(frame: pd.DataFrame, index: bool = True, **options) -> str:
    """``frame`` as a pipe table (`pandas.DataFrame.to_markdown`'s), its column and index
    labels and its text cells as `md_text`; numbers are formatted as tabulate formats them
    (``floatfmt`` in ``options``)."""
    shown = frame.copy()
    shown.columns = [md_text(c) for c in shown.columns]
    if index:
        shown.index = pd.Index([md_text(i) for i in shown.index], name=_name(shown.index))
    for column in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = shown[column].map(_text_cell).astype(object)
    return shown.to_markdown(index=index, **options)


def _name(index: pd.Index):
    return None if index.name is None else md_text(index.name)


def _text_cell(value):
    """A text cell as `md_text`; a number (in a column of mixed kinds) or None as it is."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    return md_text(value)


def md_link(text, target: str, image: bool = False) -> str:
    """A Markdown link (or image) to a file of the report: ``text`` as `md_text`, the target
    percent-encoded, so neither can close the link early."""
    from urllib.parse import quote

    return f"{'!' if image else ''}[{md_text(text)}]({quote(target)})"
