"""Built-in chat commands, answered without the model: /new, /stop, /status, /help."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.durable.inbox import Inbox
from agent.durable.sessions import SessionStore
from agent.model.responses import ProviderHealth
from agent.turns.state import TurnRecord
from channels.capabilities import CHAT_COMMANDS

HELP = (
    "Commands:\n"
    "/new — start a fresh conversation (the bot forgets this chat's history)\n"
    "/stop — stop the answer being worked on\n"
    "/status — model and its health, waiting messages, tokens and cost of the last answer\n"
    "/help — this list\n"
    "Anything else is a message for the assistant."
)
COMMANDS = dict(CHAT_COMMANDS)


@dataclass(frozen=True)
class CommandContext:
    """What a command may see and touch: one chat's session, its last turn, its running turn."""

    chat_key: str
    sessions: SessionStore
    model: str
    last_turn: TurnRecord | None
    cancel: Callable[[], bool]  # stops the chat's running turn; False when none runs
    inbox: Inbox
    health: ProviderHealth
    history_budget: int  # tokens of earlier turns a turn may send


def parse_command(text: str) -> str | None:
    """`/status` or `/status@my_bot` -> "status"; anything else -> None."""
    words = text.strip().split()
    if not words or not words[0].startswith("/"):
        return None
    name = words[0][1:].split("@", 1)[0].lower()
    return name if name in COMMANDS else None


async def run_command(text: str, ctx: CommandContext) -> str | None:
    name = parse_command(text)
    if name is None:
        return None
    if name == "new":
        ctx.cancel()
        await ctx.sessions.new_session(ctx.chat_key)
        return "Started a fresh conversation."
    if name == "stop":
        return "Stopping." if ctx.cancel() else "Nothing is running."
    if name == "status":
        return await _status(ctx)
    return HELP


async def _status(ctx: CommandContext) -> str:
    count = await ctx.sessions.count(ctx.chat_key)
    waiting = await ctx.inbox.waiting(ctx.chat_key)
    recent = await ctx.sessions.recent(ctx.chat_key)
    tokens = sum(ctx.sessions.tokens(m) for turn in recent.turns for m in turn.messages)
    summary = "; earlier turns summarised" if recent.summary else ""
    lines = [
        f"Model: {ctx.model} ({ctx.health.describe()})",
        f"Conversation: {count} messages; waiting to be answered: {waiting}",
        f"History: about {tokens:,} of {ctx.history_budget:,} tokens{summary}",
    ]
    last = ctx.last_turn
    if last is None:
        lines.append("Last answer: none yet")
    else:
        cost = f"${last.cost_usd:.4f}" if last.cost_usd else "unknown"
        lines.append(
            f"Last answer: {last.prompt_tokens} prompt + {last.completion_tokens} completion "
            f"tokens, cost {cost}, ended: {last.stop_reason}"
        )
    return "\n".join(lines)
