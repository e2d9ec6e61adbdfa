"""`agent run -m`: one turn through the same runtime path as every channel (the cli one)."""

from __future__ import annotations

import json
import sys
import uuid

from agent.app import build_app
from agent.config import Settings
from agent.turns.loop import ToolEvent
from agent.turns.state import Access
from channels.base import ChatRef, IncomingMessage
from channels.cli import TerminalChannel

ARGS_PREVIEW = 80


def describe_event(event: ToolEvent) -> str:
    """`shell(command="cat a.txt") ok 0.01 s`: enough to follow along, never whole files."""
    try:
        args = json.loads(event.arguments or "{}")
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    except (json.JSONDecodeError, AttributeError):
        shown = event.arguments
    if len(shown) > ARGS_PREVIEW:
        shown = shown[: ARGS_PREVIEW - 1] + "…"
    status = "ok" if event.ok else "error"
    return f"  tool {event.name}({shown}) {status} {event.seconds:.2f} s"


async def run_once(settings: Settings, text: str, *, session: str | None = None) -> int:
    """Answer `text`, print the reply on stdout, tool activity on stderr. Exit status."""
    channel = TerminalChannel()
    app = await build_app(settings)
    try:
        runtime = app.runtime(channel, Access(open_to_all=True))
        chat = ChatRef("cli", f"session:{session}" if session else f"oneshot:{uuid.uuid4().hex}")
        message = IncomingMessage(chat=chat, sender_id="owner", sender_name="owner", text=text)
        reply = await runtime.handle(
            message,
            on_event=lambda event: print(
                app.scrub(describe_event(event)), file=sys.stderr, flush=True
            ),
        )
        record = runtime.last_turns.get(chat.key)
        if record is not None and record.stop_reason == "error":
            print(f"error: {app.scrub(record.error)}", file=sys.stderr)
            return 1
        if reply is not None:
            await channel.send(chat, reply)
        if record is not None:
            print(
                f"[turn ended: {record.stop_reason}; {len(record.events)} tool calls; "
                f"{record.prompt_tokens}+{record.completion_tokens} tokens]",
                file=sys.stderr,
            )
        return 0
    finally:
        if app.board is not None and app.board.finite_patterns:
            pins = ", ".join(map(str, app.board.finite_patterns))
            wait = f"at most {app.board.pattern_grace_s:g} s"
            print(f"waiting for the pattern on pin {pins} to end ({wait})", file=sys.stderr)
        await app.close()
