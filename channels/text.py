"""Reply text for platforms: split to a size limit, and Markdown to Telegram's HTML (pure).

Splitting works on the Markdown source: by paragraph, then line, then word; a code block is
kept whole when it fits, and otherwise closed at the end of one part and reopened in the
next, so every part renders on its own.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(\s*)(```|~~~)(.*)$")


@dataclass(frozen=True)
class _Block:
    text: str
    fence: str = ""  # the opening fence line when the block is code, e.g. "```python"


def _blocks(text: str) -> list[_Block]:
    """Paragraphs and fenced code blocks, in order."""
    blocks: list[_Block] = []
    paragraph: list[str] = []
    code: list[str] | None = None
    fence = ""

    def flush() -> None:
        if paragraph:
            blocks.append(_Block("\n".join(paragraph)))
            paragraph.clear()

    for line in text.split("\n"):
        match = _FENCE.match(line)
        if code is not None:
            code.append(line)
            if match and match.group(2) == fence.strip()[:3] and not match.group(3).strip():
                blocks.append(_Block("\n".join(code), fence=fence.strip()))
                code = None
        elif match:
            flush()
            code, fence = [line], line
        elif line.strip():
            paragraph.append(line)
        else:
            flush()
    flush()
    if code is not None:  # an unclosed fence: close it so it renders
        blocks.append(_Block("\n".join([*code, fence.strip()[:3]]), fence=fence.strip()))
    return blocks


def split_message(text: str, limit: int) -> list[str]:
    """Parts of at most `limit` characters, cut at the most natural boundary available."""
    if len(text) <= limit:
        return [text] if text.strip() else []
    pieces: list[str] = []
    for block in _blocks(text):
        if len(block.text) <= limit:
            pieces.append(block.text)
        elif block.fence:
            pieces += _split_code(block, limit)
        else:
            pieces += _split_words(block.text, limit, "\n")
    return _pack(pieces, limit, "\n\n")


def _pack(pieces: list[str], limit: int, joiner: str) -> list[str]:
    parts: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}{joiner}{piece}" if current else piece
        if len(candidate) <= limit:
            current = candidate
        else:
            if current:
                parts.append(current)
            current = piece
    if current:
        parts.append(current)
    return parts


def _split_words(text: str, limit: int, joiner: str) -> list[str]:
    """Lines when they fit, else words, else a hard cut (a word longer than a message)."""
    pieces: list[str] = []
    for line in text.split("\n"):
        if len(line) <= limit:
            pieces.append(line)
            continue
        words: list[str] = []
        for word in line.split(" "):
            words += [word[i : i + limit] for i in range(0, len(word), limit)] or [""]
        pieces += _pack(words, limit, " ")
    return _pack(pieces, limit, joiner)


def _split_code(block: _Block, limit: int) -> list[str]:
    """A code block too long for one message: closed and reopened across parts."""
    opening, closing = block.fence, block.fence[:3]
    body = block.text.split("\n")[1:-1]
    room = limit - len(opening) - len(closing) - 2
    parts = _split_words("\n".join(body), room, "\n")
    return [f"{opening}\n{part}\n{closing}" for part in parts]


# -- Markdown to Telegram HTML ---------------------------------------------------------------

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$")


def markdown_to_telegram_html(text: str) -> str:
    """The subset of Markdown models write, as the HTML Telegram accepts; everything else is
    escaped, so the result always parses."""
    out: list[str] = []
    for block in _blocks_with_blank_lines(text):
        if block.fence:
            language = block.fence[3:].strip()
            body = html.escape("\n".join(block.text.split("\n")[1:-1]), quote=False)
            attr = f' class="language-{html.escape(language)}"' if language else ""
            out.append(f"<pre><code{attr}>{body}</code></pre>")
        else:
            out.append("\n".join(_render_line(line) for line in block.text.split("\n")))
    return "\n\n".join(out)


def _blocks_with_blank_lines(text: str) -> list[_Block]:
    return _blocks(text) if text.strip() else []


def _render_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"<b>{_inline(heading.group(1))}</b>"
    if line.startswith(">"):
        return f"<blockquote>{_inline(line.lstrip('>').strip())}</blockquote>"
    bullet = re.match(r"^(\s*)[-*+]\s+(.*)$", line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _attr(escaped: str) -> str:
    return escaped.replace('"', "&quot;")


def _inline(text: str) -> str:
    codes: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _INLINE_CODE.sub(keep_code, text)
    text = html.escape(text, quote=False)
    # The text is escaped already, the URL included; only quotes remain for the attribute.
    text = _LINK.sub(lambda m: f'<a href="{_attr(m.group(2))}">{m.group(1)}</a>', text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], text)
