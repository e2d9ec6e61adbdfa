"""A fetched body as text for the model: HTML as readable Markdown, JSON and plain text as
they are, anything else not read at all.

HTML goes through trafilatura. It is one maintained library that finds a page's main text —
leaving navigation, headers, footers, scripts, styles and ads behind — and writes it as
Markdown itself (headings, lists, tables, links); in published comparisons of open-source
extractors (its own evaluation, ScrapingHub's article-extraction benchmark) it scores at or
near the top, and it falls back on readability and jusText internally when its own pass finds
little. readability-lxml + markdownify would be a smaller install but two libraries and the
glue between them, and readability alone keeps less of a page's structure. A page with no
main text found (a short page, a list of links) gets trafilatura's plain-text baseline.
Imported on first use (lxml and friends, about 0.1 s).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Literal

Kind = Literal["html", "json", "text"]

_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"text/plain", "text/markdown", "text/x-markdown", "text/csv"})


@dataclass(frozen=True)
class Page:
    title: str
    text: str


def kind_of(media_type: str) -> Kind | None:
    """What a body of this type reads as (None: web_fetch does not read it)."""
    if media_type in _HTML:
        return "html"
    if media_type == "application/json" or media_type.endswith("+json"):
        return "json"
    if media_type in _TEXT:
        return "text"
    return None


def page_text(body: bytes, kind: Kind, charset: str | None, url: str) -> Page:
    """The body's text; for HTML its main content as Markdown and the page's title.
    CPU-bound for a big page: run it in a thread."""
    if kind != "html":
        return Page(title="", text=_decode(body, charset))
    import trafilatura

    # With a charset from the headers, decode here; otherwise trafilatura reads the page's
    # own <meta charset> or guesses.
    html: str | bytes = _decode(body, charset) if charset else body
    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        favor_recall=True,
    )
    if not text:
        text = trafilatura.html2txt(html)
    metadata = trafilatura.extract_metadata(html)
    title = (metadata.title or "") if metadata is not None else ""
    return Page(title=" ".join(title.split()), text=text.strip())


def _decode(body: bytes, charset: str | None) -> str:
    try:
        codec = codecs.lookup(charset or "utf-8").name
    except LookupError:
        codec = "utf-8"
    return body.decode(codec, errors="replace")
