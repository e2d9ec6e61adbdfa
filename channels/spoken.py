"""A reply as it is read aloud in a voice note (pure): code blocks, tables and links are not
read — one line at the end says the written reply holds them — nor Markdown's marks."""

from __future__ import annotations

import re

_CODE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_TABLE = re.compile(r"(?:^[ \t]*\|.*\|[ \t]*(?:\n|$)){2,}", re.M)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_URL = re.compile(r"<?\bhttps?://[^\s>)]*[^\s>).,;:!?]>?")
_MARKS = re.compile(r"[*_`#>~]+|^[ \t]*[-+][ \t]+", re.M)
_NAMES = {"code": "code", "table": "a table", "link": "links"}


def spoken_text(text: str) -> str:
    """What the speech model reads: the prose of `text`, and a closing line naming what it
    left out (code, a table, links), so a listener knows to look at the written reply."""
    left: list[str] = []

    def leave(kind: str, said: str = " ") -> str:
        if kind not in left:
            left.append(kind)
        return said

    text = _CODE.sub(lambda m: leave("code"), text)
    text = _TABLE.sub(lambda m: leave("table", "\n"), text)
    text = _LINK.sub(lambda m: leave("link", m.group(1)), text)
    text = _URL.sub(lambda m: leave("link", "a link"), text)
    text = _MARKS.sub("", text)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\n\s*\n+", "\n\n", text).strip()
    if left:
        names = [_NAMES[kind] for kind in left]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        text += f"\n\nThe written reply also has {listed}, not read aloud."
    return text.strip()
