"""`agent run -m`: one turn through the same runtime path as every channel (the cli one),
in this process or in the local daemon. What the person sees — tool lines, the reply, how
the turn ended — is made here once for both.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from agent.app import build_app
from agent.cli.local_server import Connection, Request
from agent.config import Settings
from agent.security import Scrubber
from agent.turns.loop import ToolEvent
from agent.turns.runtime import ChannelRuntime
from agent.turns.state import Access
from channels.base import ApprovalAnswer, ApprovalQuestion, ChatRef, IncomingMessage, MayAnswer
from channels.cli import TERMINAL_ANSWERS, TerminalChannel

log = logging.getLogger(__name__)

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
) -> Ended:
    """Run the one-shot's turn: each tool call goes to `say` (stderr) as it finishes, the
    reply to `terminal` (stdout). A fresh chat unless `session` names a stored one."""
    chat = ChatRef("cli", f"session:{session}" if session else f"oneshot:{uuid.uuid4().hex}")
    message = IncomingMessage(chat=chat, sender_id="owner", sender_name="owner", text=text)
    earlier = runtime.last_turns.get(chat.key)
    try:
        reply = await runtime.handle(
            message, on_event=lambda event: say(scrub(describe_event(event)))
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


async def run_once(settings: Settings, text: str, *, session: str | None = None) -> int:
    """Answer `text` in this process: reply on stdout, tool activity on stderr. Exit status."""
    channel = TerminalChannel()
    app = await build_app(settings)
    try:
        runtime = app.runtime(channel, Access(open_to_all=True))
        ended = await answer(
            runtime,
            app.scrub,
            text,
            session,
            terminal=channel,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
    finally:
        if app.board is not None and app.board.finite_patterns:
            pins = ", ".join(map(str, app.board.finite_patterns))
            wait = f"at most {app.board.pattern_grace_s:g} s"
            print(f"waiting for the pattern on pin {pins} to end ({wait})", file=sys.stderr)
        await app.close()
    if ended.error is not None:
        print(f"error: {ended.error}", file=sys.stderr)
        return 1
    if ended.summary:
        print(ended.summary, file=sys.stderr)
    return 0


# -- the same, in the local daemon: the "run" op ----------------------------------------


@dataclass(frozen=True)
class _Asker:
    conn: Connection
    tty: bool  # the client's stdin is a terminal: a person can answer


_ASKER: ContextVar[_Asker] = ContextVar("one_shot_asker")


class _ReplyOut(io.StringIO):
    """The terminal channel's stdout, sent to the client as `reply` events, one per part."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self._conn = conn

    def flush(self) -> None:
        if text := self.getvalue():
            self._conn.send({"event": "reply", "text": text})
            self.seek(0)
            self.truncate()


class SocketChannel(TerminalChannel):
    """The terminal, at the other end of the daemon's socket: approvals are asked there
    (on the connection of the one-shot whose turn asks, known from its context)."""

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        asker = _ASKER.get()
        if not asker.tty:
            line = f"{question.text}\nDenied: no terminal to ask on."
            asker.conn.send({"event": "note", "line": line})
            return "deny"
        asker.conn.send({"event": "ask", "id": question.id, "text": question.text})
        await asker.conn.drain()
        while True:  # an answer to a question that timed out earlier is not this one's
            said = await asker.conn.next_line()
            if said.get("id") == question.id:
                return TERMINAL_ANSWERS.get(str(said.get("answer", "")).strip().lower(), "deny")


class OneShots:
    """One-shots in the daemon: one runtime of the cli channel, built once (its system
    prompt too), each one-shot answered on the connection that asked for it."""

    def __init__(self, runtime: ChannelRuntime, scrub: Scrubber, fingerprint: str) -> None:
        self.runtime = runtime
        self._scrub = scrub
        self._fingerprint = fingerprint

    async def run(self, request: Request, conn: Connection) -> None:
        """The "run" op: `{"op": "run", "message", "session", "settings", "tty"}`."""
        if request.get("settings") != self._fingerprint:
            reason = _differences(self._fingerprint, str(request.get("settings")))
            conn.send({"event": "declined", "reason": f"it runs with other settings: {reason}"})
            return
        text, session = request.get("message"), request.get("session")
        if not isinstance(text, str) or not isinstance(session, str | None):
            conn.send({"event": "error", "message": "bad run request", "code": 2})
            return
        log.info("one-shot from the local socket%s", f", session {session}" if session else "")
        _ASKER.set(_Asker(conn, tty=request.get("tty") is True))
        ended = await answer(
            self.runtime,
            self._scrub,
            text,
            session,
            terminal=TerminalChannel(out=_ReplyOut(conn)),
            say=lambda line: conn.send({"event": "tool", "line": line}),
        )
        if ended.error is not None:
            conn.send({"event": "error", "message": ended.error, "code": 1})
        else:
            conn.send({"event": "done", "code": 0, "stderr": ended.summary})


def _differences(mine: str, theirs: str) -> str:
    """What differs between two settings fingerprints (`agent.home`), for `agent -v run -m`."""
    try:
        (my_config, my_env), (their_config, their_env) = json.loads(mine), json.loads(theirs)
    except (ValueError, TypeError):
        return "an unreadable description"
    names = sorted(n for n in {*my_env, *their_env} if my_env.get(n) != their_env.get(n))
    found = ["the config file"] if my_config != their_config else []
    return ", ".join(found + names) or "none found"
