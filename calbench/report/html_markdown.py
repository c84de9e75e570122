"""calbench's Markdown (tables, claims, the reproduction overview) as the HTML report's
HTML: kept to text, emphasis, lists, tables and links within the page, its tables sortable."""

from __future__ import annotations

import html
import re


def markdown_html(text: str) -> str:
    """Markdown (calbench's tables and claims) as HTML, its headings a level down and its
    tables sortable, numbers by their values."""
    import markdown

    out = _kept_to_text(markdown.markdown(text, extensions=["tables"]))
    for level in (3, 2, 1):  # the page's sections are h2
        out = out.replace(f"<h{level}>", f"<h{level + 2}>").replace(
            f"</h{level}>", f"</h{level + 2}>"
        )
    out = out.replace("<table>", '<table class="sortable">')
    return re.sub(r"<td([^>]*)>(.*?)</td>", _numeric_cell, out, flags=re.S)


#: What calbench's Markdown becomes: text, emphasis, lists and tables; nothing that runs.
_KEPT_TAGS = {
    *("p", "br", "hr", "strong", "em", "code", "pre", "sub", "sup", "u", "blockquote"),
    *("h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "a"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}


def _kept_to_text(out: str) -> str:
    """The HTML of calbench's Markdown kept to `_KEPT_TAGS`, links to this page's anchors
    and relative files, and a table column's alignment: every name is escaped where the
    Markdown is written (`calbench.markup`); this holds where one was ever missed."""
    import nh3

    return nh3.clean(
        out,
        tags=_KEPT_TAGS,
        attributes={"a": {"href"}, "th": {"style"}, "td": {"style"}},
        attribute_filter=_kept_attribute,
        filter_style_properties={"text-align"},
        url_schemes=set(),
        link_rel=None,
    )


def _kept_attribute(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "href" and not _in_report(value):
        return None
    return value


def _in_report(href: str) -> bool:
    """An anchor of this page, or a file beside it (no scheme, host or absolute path)."""
    return href.startswith("#") or not (
        ":" in href.split("/")[0] or href.startswith(("/", "\\")) or "\\" in href
    )


_LEADING_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _numeric_cell(match: re.Match) -> str:
    attributes, content = match.groups()
    text = html.unescape(re.sub(r"<[^>]+>", "", content)).replace("\u2212", "-")
    number = _LEADING_NUMBER.match(text)
    if number is None or "data-sort" in attributes:
        return match.group(0)
    return f'<td{attributes} data-sort="{float(number.group(0))!r}">{content}</td>'
