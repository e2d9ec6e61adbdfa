"""One turn asked from the terminal (`agent run -m`, each line of `agent chat`), in this
process or through the local daemon: what the person sees — tool lines, the reply, how the
turn ended — made once for both.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from agent.runtime.channel_runtime import ChannelRuntime
from agent.security import Scrubber
from agent.turns.loop import ToolEvent
from channels.base import ChatRef, IncomingMessage
from channels.terminal import TerminalChannel

log = logging.getLogger(__name__)

ARGS_PREVIEW = 80


def describe_event(event: ToolEvent) -> str:
    """`shell(command="cat a.txt") ok 0.01 s` (or error, or skipped: a call made again or
    over the caps, not run): enough to follow along, never whole files."""
    try:
        args = json.loads(event.arguments or "{}")
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    except (json.JSONDecodeError, AttributeError):
        shown = event.arguments
    if len(shown) > ARGS_PREVIEW:
        shown = shown[: ARGS_PREVIEW - 1] + "…"
    status = "ok" if event.ok else "error" if event.ran else "skipped"
    return f"  tool {event.name}({shown}) {status} {event.seconds:.2f} s"


@dataclass(frozen=True)
class Ended:
    """How a one-shot ended: `error` (exit 1) or a summary line ("" for a command)."""

    error: str | None = None
    summary: str = ""


async def answer(
    runtime: ChannelRuntime,
    scrub: Scrubber,
    text: str,
    session: str | None,
    *,
    terminal: TerminalChannel,
    say: Callable[[str], None],
    on_text: Callable[[str], None] | None = None,
) -> Ended:
    """Run the one-shot's turn: each tool call goes to `say` (stderr) as it finishes, the
    reply to `terminal` (stdout); with `on_text` the reply's text is also handed over as it
    streams (`agent chat` shows it live). A fresh chat unless `session` names a stored one."""
    chat = ChatRef("cli", f"session:{session}" if session else f"oneshot:{uuid.uuid4().hex}")
    message = IncomingMessage(chat=chat, sender_id="owner", sender_name="owner", text=text)
    earlier = runtime.last_turns.get(chat.key)
    try:
        reply = await runtime.handle(
            message, on_event=lambda event: say(scrub(describe_event(event))), on_text=on_text
        )
        record = runtime.last_turns.get(chat.key)
    finally:
        if session is None:  # a daemon answers many: forget the one-off chat's record
            runtime.last_turns.pop(chat.key, None)
    if record is earlier:  # a command (/status...) answered without a turn
        record = None
    if record is not None and record.stop_reason == "error":
        return Ended(error=scrub(record.error))
    if reply is not None:
        await terminal.send(chat, reply)
    if record is None:
        return Ended()
    return Ended(
        summary=f"[turn ended: {record.stop_reason}; {len(record.events)} tool calls; "
        f"{record.prompt_tokens}+{record.completion_tokens} tokens]"
    )
