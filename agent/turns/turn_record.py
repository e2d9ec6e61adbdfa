"""TurnRecord: how a chat's last turn went (tokens, cost, its tool calls, why it stopped),
for /status and the terminal's stderr line. Plain data, so commands and the runtime can
both read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.model.responses import ToolCall
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
    handed_back: list[ToolCall] = field(default_factory=list)  # an API client's tools' calls
