"""How Telegram reads message text: HTML parse mode, automatic entities, length limits.

A reply that Telegram would refuse with "can't parse entities" must fail in tests too, so the
fake Telegram server parses ``parse_mode="HTML"`` text the way the Bot API (tdlib) does: only the
supported tags, closed in order, and only ``&lt; &gt; &amp; &quot;`` and numeric entities.
The error texts follow tdlib's wording; offsets are UTF-8 byte offsets, as Telegram reports them.
Deliberately stricter than Telegram in one place: a bare ``&`` is an error here (Telegram keeps
it literally), because an adapter that forgets to escape ``&`` also forgets ``<``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_CAPTION",
    "MAX_TEXT",
    "HtmlParseError",
    "find_entities",
    "parse_html",
    "render_text",
    "utf16_len",
]

MAX_TEXT, MAX_CAPTION = 4096, 1024

_TAG_ENTITY = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "span": "spoiler",
    "tg-spoiler": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_CHAR_REF = re.compile(r"&(?:(lt|gt|amp|quot)|#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,8}));")
_TAG_NAME = re.compile(r"[A-Za-z0-9-]*")
_ATTR_NAME = re.compile(r"[A-Za-z0-9_-]*")
_BARE_VALUE = re.compile(r"[^\s>]*")
_SPACE = re.compile(r"\s*")
_AUTO_ENTITY = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@\w{3,32})?|(?<![\w@])@\w{5,32}")


class HtmlParseError(ValueError):
    """Not valid Telegram HTML; ``str()`` is the reason Telegram gives after "can't parse"."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's offsets and length limits."""
    return len(text.encode("utf-16-le")) // 2


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Return (plain text, entities with UTF-16 offsets) or raise :class:`HtmlParseError`."""
    parser = _Parser(text)
    parser.run()
    return "".join(parser.out), sorted(parser.entities, key=lambda e: (e["offset"], -e["length"]))


@dataclass
class _Open:
    tag: str
    attrs: dict[str, str]
    offset: int
    language: str | None = None


class _Parser:
    """A single left-to-right scan, like tdlib's parse_html."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.pos = 0  # UTF-16 length of ``out``
        self.stack: list[_Open] = []
        self.entities: list[dict[str, Any]] = []

    def at(self, i: int) -> str:
        return f"at byte offset {len(self.text[:i].encode())}"

    def emit(self, chars: str) -> None:
        self.out.append(chars)
        self.pos += utf16_len(chars)

    def run(self) -> None:
        text, i = self.text, 0
        while i < len(text):
            c = text[i]
            if c == "&":
                i = self.char_ref(i)
            elif c != "<":
                self.emit(c)
                i += 1
            elif text.startswith("</", i):
                i = self.end_tag(i)
            else:
                i = self.start_tag(i)
        if self.stack:
            tag = self.stack[-1].tag
            raise HtmlParseError(f'Can\'t find end tag corresponding to start tag "{tag}"')

    def char_ref(self, i: int) -> int:
        m = _CHAR_REF.match(self.text, i)
        if m is None:
            raise HtmlParseError(f"Unescaped '&' {self.at(i)}: write it as &amp;")
        if m.group(1):
            self.emit(_NAMED[m.group(1)])
        else:
            code = int(m.group(2)) if m.group(2) else int(m.group(3), 16)
            if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise HtmlParseError(f"Invalid character reference {self.at(i)}")
            self.emit(chr(code))
        return m.end()

    def skip_space(self, j: int) -> int:
        m = _SPACE.match(self.text, j)
        return m.end() if m else j

    def start_tag(self, i: int) -> int:
        text = self.text
        m = _TAG_NAME.match(text, i + 1)
        name = m.group().lower() if m else ""
        if name not in _TAG_ENTITY:
            raise HtmlParseError(f'Unsupported start tag "{name}" {self.at(i)}')
        j = m.end() if m else i + 1
        attrs: dict[str, str] = {}
        while True:
            j = self.skip_space(j)
            if j >= len(text):
                raise HtmlParseError(f"Unclosed start tag {self.at(i)}")
            if text[j] == ">":
                break
            am = _ATTR_NAME.match(text, j)
            attr = am.group().lower() if am else ""
            if not attr:
                raise HtmlParseError(f'Empty attribute name in the tag "{name}" {self.at(j)}')
            j = self.skip_space(j + len(attr))
            value = ""
            if j < len(text) and text[j] == "=":
                value, j = self.attr_value(i, self.skip_space(j + 1))
            attrs[attr] = value
        self.open(name, attrs)
        return j + 1

    def attr_value(self, tag_start: int, j: int) -> tuple[str, int]:
        text = self.text
        if j >= len(text):
            raise HtmlParseError(f"Unclosed start tag {self.at(tag_start)}")
        if text[j] in "\"'":
            end = text.find(text[j], j + 1)
            if end < 0:
                raise HtmlParseError(f"Unclosed start tag {self.at(tag_start)}")
            raw, j = text[j + 1 : end], end + 1
        else:
            bm = _BARE_VALUE.match(text, j)
            raw = bm.group() if bm else ""
            j += len(raw)
        return _CHAR_REF.sub(_unescape, raw), j

    def open(self, name: str, attrs: dict[str, str]) -> None:
        if name == "span" and attrs.get("class") != "tg-spoiler":
            raise HtmlParseError('Tag "span" must have class "tg-spoiler"')
        if name == "tg-emoji" and not attrs.get("emoji-id", "").isdigit():
            raise HtmlParseError('Tag "tg-emoji" must have a numeric "emoji-id" attribute')
        language = attrs.get("class", "")
        in_pre = name == "code" and self.stack and self.stack[-1].tag == "pre"
        if in_pre and language.startswith("language-"):
            self.stack[-1].language = language.removeprefix("language-")
        self.stack.append(_Open(name, attrs, self.pos))

    def end_tag(self, i: int) -> int:
        m = _TAG_NAME.match(self.text, i + 2)
        name = m.group().lower() if m else ""
        j = self.skip_space(m.end() if m else i + 2)
        if j >= len(self.text) or self.text[j] != ">":
            raise HtmlParseError(f"Unclosed end tag {self.at(i)}")
        if not self.stack:
            raise HtmlParseError(f"Unexpected end tag {self.at(i)}")
        top = self.stack.pop()
        if top.tag != name:
            raise HtmlParseError(
                f'Unmatched end tag {self.at(i)}, expected "</{top.tag}>", found "</{name}>"'
            )
        self.close(top)
        return j + 1

    def close(self, top: _Open) -> None:
        length = self.pos - top.offset
        if length <= 0:
            return
        entity: dict[str, Any] = {"type": _TAG_ENTITY[top.tag], "offset": top.offset}
        entity["length"] = length
        if top.tag == "a":
            entity["url"] = top.attrs.get("href") or _tail(self.out, length)
        elif top.tag == "pre" and top.language:
            entity["language"] = top.language
        elif top.tag == "blockquote" and "expandable" in top.attrs:
            entity["type"] = "expandable_blockquote"
        elif top.tag == "tg-emoji":
            entity["custom_emoji_id"] = top.attrs["emoji-id"]
        if top.tag == "code" and self.stack and self.stack[-1].tag == "pre":
            return  # <pre><code class="language-x"> is one pre entity
        self.entities.append(entity)


def _unescape(m: re.Match[str]) -> str:
    if m.group(1):
        return _NAMED[m.group(1)]
    code = int(m.group(2)) if m.group(2) else int(m.group(3), 16)
    return chr(code) if 0 < code <= 0x10FFFF else "\ufffd"


def _tail(parts: list[str], units: int) -> str:
    """The last ``units`` UTF-16 code units of the text emitted so far (a link's own text)."""
    data = "".join(parts).encode("utf-16-le")
    return data[len(data) - 2 * units :].decode("utf-16-le")


def find_entities(text: str) -> list[dict[str, Any]]:
    """The bot_command and mention entities Telegram adds to a user's text (UTF-16 offsets)."""
    return [
        {
            "type": "bot_command" if m.group().startswith("/") else "mention",
            "offset": utf16_len(text[: m.start()]),
            "length": utf16_len(m.group()),
        }
        for m in _AUTO_ENTITY.finditer(text)
    ]


def render_text(
    text: str, parse_mode: str | None, entities: list[Any], *, caption: bool
) -> tuple[str, list[Any]]:
    """What Telegram stores for a message text or caption: (plain text, entities).

    Raises ValueError with Telegram's description (after "Bad Request: ") when it would refuse.
    Lengths are UTF-16 code units, after the markup is parsed away. Markdown is not validated.
    """
    if not text.strip() and not caption:
        raise ValueError("message text is empty")
    mode = (parse_mode or "").lower()
    if mode == "html":
        try:
            text, entities = parse_html(text)
        except HtmlParseError as e:
            raise ValueError(f"can't parse entities: {e}") from None
    elif mode not in ("", "markdown", "markdownv2"):
        raise ValueError(f'unsupported parse_mode "{parse_mode}"')
    if not text.strip() and not caption:
        raise ValueError("message text is empty")
    if utf16_len(text) > (MAX_CAPTION if caption else MAX_TEXT):
        raise ValueError("message caption is too long" if caption else "message is too long")
    return text, entities
