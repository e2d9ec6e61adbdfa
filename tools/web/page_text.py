"""A fetched body as text for the model: HTML as readable Markdown, JSON and plain text as
they are, anything else not read at all.

HTML is parsed by Beautiful Soup (Python's own parser under it) and written as Markdown by
markdownify (headings, lists, tables, links). Both are pure Python, well kept and about 2 MB
together, so a Raspberry Pi on 32 or 64 bits installs them from one wheel each and pip 23 has
no extras to trip over. trafilatura, used before, scores a page's blocks and finds its main
text a little better, but brought 61 MB (Babel, lxml, dateparser, jusText) and an extra that
older pips cannot install with hashes. The page's main text is found by the document's own
structure: its `<main>`, else its only `<article>`, else its body, with navigation, page
headers and footers, asides, forms, scripts, styles and hidden elements taken out (hidden
text is where a page keeps words for machines, not for readers). Imported on first use.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, Tag

Kind = Literal["html", "json", "text"]

_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"text/plain", "text/markdown", "text/x-markdown", "text/csv"})
# Never the page's text: code, styling, chrome around the content, and controls.
_NOT_TEXT = (
    *("script", "style", "noscript", "template", "nav", "aside", "form", "iframe", "svg"),
    *("canvas", "button", "select", "dialog", "object", "embed", "img", "picture"),
    *("video", "audio"),
)
# The page's own header and footer; inside an article they hold its title and byline.
_PAGE_CHROME = ("header", "footer")


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
    CPU-bound for a big page (about 0.4 s a megabyte): run it in a thread."""
    if kind != "html":
        return Page(title="", text=_decode(body, charset))
    from bs4 import BeautifulSoup

    # With a charset from the headers, decode here; otherwise Beautiful Soup reads the
    # page's own <meta charset> or guesses.
    soup = BeautifulSoup(_decode(body, charset) if charset else body, "html.parser")
    title = soup.title.get_text(" ") if soup.title is not None else ""
    text = _markdown(_main_part(soup))
    return Page(title=" ".join(title.split()), text=_tidy(text))


def _main_part(soup: BeautifulSoup) -> Tag | BeautifulSoup:
    """The part of the page that holds its text, with everything else taken out of it."""
    for tag in soup.find_all(_NOT_TEXT):
        tag.decompose()
    for tag in soup.find_all(_hidden):
        tag.decompose()
    for tag in soup.find_all(_PAGE_CHROME):
        if tag.find_parent(("article", "main")) is None:
            tag.decompose()
    articles = soup.find_all("article")
    return soup.find("main") or (articles[0] if len(articles) == 1 else None) or soup.body or soup


def _hidden(tag: Tag) -> bool:
    """An element a browser does not show."""
    style = str(tag.get("style", "")).replace(" ", "").lower()
    return (
        tag.has_attr("hidden")
        or str(tag.get("aria-hidden", "")).lower() == "true"
        or "display:none" in style
        or "visibility:hidden" in style
    )


def _markdown(part: Tag | BeautifulSoup) -> str:
    from markdownify import ATX, MarkdownConverter

    converter = MarkdownConverter(
        heading_style=ATX, bullets="-", escape_asterisks=False, escape_underscores=False
    )
    return str(converter.convert_soup(part))


def _tidy(text: str) -> str:
    """No run of blank lines longer than one, no trailing spaces."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    kept = [line for n, line in enumerate(lines) if line or (n and lines[n - 1])]
    return "\n".join(kept)


def _decode(body: bytes, charset: str | None) -> str:
    try:
        codec = codecs.lookup(charset or "utf-8").name
    except LookupError:
        codec = "utf-8"
    return body.decode(codec, errors="replace")
