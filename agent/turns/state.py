"""What the turn machinery remembers between turns: the last turn of each chat, and who may
talk. Plain data, so commands and the runtime can both read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.turns.loop import ToolEvent


@dataclass
class TurnRecord:
    """The last turn of a chat, for /status and the CLI's stderr line."""

    stop_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None: a call's price was unknown
    error: str = ""
    events: list[ToolEvent] = field(default_factory=list)


@dataclass(frozen=True)
class Access:
    """Who may talk to the agent on a channel: ids or @usernames; "*" is anyone."""

    allowed_users: frozenset[str] = frozenset()
    open_to_all: bool = False  # the terminal: whoever runs the command owns it
