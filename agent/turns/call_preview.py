"""What of a reply may be shown while it streams: never a call the model writes as text.

A reply that begins like such a call is not streamed at all; in a reply that began as
prose, a line that opens a call in its markup (`<tool_call>`, `{"name": ...}`) ends what is
shown of it. Its answer comes once the tools ran, and replaces the preview.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

# How a reply that is a call written as text begins (agent/model/profiles/text_call_formats.py).
CALL_STARTS = ("{", "[", "```", "<tool", "<function", "<|", "<｜", "functools[")
# How a line opens a call within prose: markup only, as a brace, a bracket or a fence there
# is more often an answer's JSON, Markdown link or code.
LINE_OPENS = ("<tool", "<function", "<|", "<｜", "functools[", "[TOOL_CALLS]", '{"name"')


class HoldCallPrefix:
    """A stream filter for one reply: nothing is shown while it could still be a call
    written as text, nothing of a reply that begins like one, and nothing from a line that
    opens one on (a raw call never flashes up as a preview)."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self._on_text = on_text
        self._held = ""  # received, not shown yet
        self._state: Literal["holding", "open", "closed"] = "holding"

    def __call__(self, delta: str) -> None:
        if self._state == "closed":
            return
        self._held += delta
        if self._state == "holding":
            start = self._held.lstrip()
            if not start or start.startswith(CALL_STARTS):
                self._state = "closed" if start else "holding"
                return
            if any(prefix.startswith(start) for prefix in CALL_STARTS):
                return
            self._state = "open"
        self._show_lines()

    def _show_lines(self) -> None:
        """Show what is held, up to a line that opens a call (then nothing more) or one that
        may still open one (held until it tells)."""
        lines = self._held.split("\n")
        for index, line in enumerate(lines):
            begun = line.lstrip()
            last = index == len(lines) - 1
            if begun.startswith(LINE_OPENS) or (
                last and (not begun or any(o.startswith(begun) for o in LINE_OPENS))
            ):
                shown = "\n".join(lines[:index]) + ("\n" if index else "")
                self._held = self._held[len(shown) :]
                if shown:
                    self._on_text(shown)
                if begun.startswith(LINE_OPENS):
                    self._state = "closed"
                return
        self._on_text(self._held)
        self._held = ""
