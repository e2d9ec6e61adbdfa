"""What the schedule and pin-watch tools share: a task kept for later in a book the runtime
gives. Both check the task the same way before it is kept, refuse through the book the
same way, show an ended entry the same way, and list the active entries first, then the
last few that ended, so the model reads one shape whichever it asks about.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from tools.base import ToolResult

MAX_TASK_CHARS = 2_000
ENDED_SHOWN = 5  # a list shows this many ended entries after the active ones


class BookRefused(Exception):
    """The book will not take or change it; the message says why, for the model."""


class Kept(Protocol):
    @property
    def status(self) -> str: ...  # "active", or how it ended


K = TypeVar("K", bound=Kept)


def task_refusal(task: str, when: str) -> ToolResult | None:
    """Why `task` (stripped and scrubbed) cannot be kept, or None. `when`: when it would run
    ("when it is due"), for the model's next try."""
    if not task:
        return ToolResult.error(f"task is empty; say what to do {when}")
    if len(task) > MAX_TASK_CHARS:
        return ToolResult.error(f"task is {len(task)} characters; keep it under {MAX_TASK_CHARS}")
    return None


def ended_note(status: str, note: str) -> str:
    """` (cancelled: the board is gone)`: how an entry ended, and why when known."""
    return f" ({status}{': ' + note if note else ''})"


def listing(found: Sequence[K], describe: Callable[[K], str], what: str) -> ToolResult:
    """The active entries, then up to ENDED_SHOWN ended ones (the book gives the newest
    first). `what`: "schedules", "pin watches"."""
    active = [e for e in found if e.status == "active"]
    ended = [e for e in found if e.status != "active"][:ENDED_SHOWN]
    if not active and not ended:
        return ToolResult.success(f"No {what}.")
    lines = [describe(e) for e in active] or [f"No active {what}."]
    if ended:
        lines += ["Ended:", *(describe(e) for e in ended)]
    return ToolResult.success("\n".join(lines))
