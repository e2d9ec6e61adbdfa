"""Built-in chat commands, answered without the model: /new, /stop, /status, /help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from channels.capabilities import CHAT_COMMANDS

if TYPE_CHECKING:
    from agent.runtime import ChannelRuntime

HELP = (
    "Commands:\n"
    "/new — start a fresh conversation (the bot forgets this chat's history)\n"
    "/stop — stop the answer being worked on\n"
    "/status — model, conversation length, tokens and cost of the last answer\n"
    "/help — this list\n"
    "Anything else is a message for the assistant."
)
COMMANDS = dict(CHAT_COMMANDS)


@dataclass(frozen=True)
class CommandContext:
    runtime: ChannelRuntime
    chat_key: str


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
    runtime = ctx.runtime
    if name == "new":
        runtime.cancel(ctx.chat_key)
        await runtime.sessions.new_session(ctx.chat_key)
        return "Started a fresh conversation."
    if name == "stop":
        return "Stopping." if runtime.cancel(ctx.chat_key) else "Nothing is running."
    if name == "status":
        return await _status(ctx)
    return HELP


async def _status(ctx: CommandContext) -> str:
    runtime = ctx.runtime
    count = await runtime.sessions.count(ctx.chat_key)
    lines = [f"Model: {runtime.llm.model}", f"Conversation: {count} messages"]
    last = runtime.last_turns.get(ctx.chat_key)
    if last is None:
        lines.append("Last answer: none yet")
    else:
        cost = f"${last.cost_usd:.4f}" if last.cost_usd else "unknown"
        lines.append(
            f"Last answer: {last.prompt_tokens} prompt + {last.completion_tokens} completion "
            f"tokens, cost {cost}, ended: {last.stop_reason}"
        )
    return "\n".join(lines)
