"""The daemon's "one-shot" op: a turn asked by `agent run -m` (or a line of `agent chat`) over
the local socket, its tool lines, questions and reply carried back over that connection; with
`"stream": true` also the reply's text as it streams (`text` events), for the chat to show.
"""

from __future__ import annotations

import io
import logging
from contextvars import ContextVar
from dataclasses import dataclass

from agent.daemon.local_server import Connection, Request
from agent.runtime.channel_runtime import ChannelRuntime
from agent.runtime.one_shot import answer
from agent.security import Scrubber
from channels.base import ApprovalAnswer, ApprovalQuestion, ChatRef, MayAnswer
from channels.terminal import TERMINAL_ANSWERS, TerminalChannel

log = logging.getLogger(__name__)


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
        self.fingerprint = fingerprint  # what its settings are read from
        self._earlier: set[str] = set()  # what they were read from before a reload

    def reloaded(self, fingerprint: str) -> None:
        """The daemon's settings were read again (agent/daemon/reload.py): an `agent chat`
        begun before, whose fingerprint is the older one, goes on with the new settings."""
        if fingerprint != self.fingerprint:
            self._earlier.add(self.fingerprint)
            self.fingerprint = fingerprint

    async def run(self, request: Request, conn: Connection) -> None:
        """The "run" op: `{"op": "run", "message", "session", "settings", "tty", "stream"}`
        ("stream" may be left out: a one-shot prints only the whole reply)."""
        if request.get("settings") not in (self.fingerprint, *self._earlier):
            reason = _differences(self.fingerprint, str(request.get("settings")))
            conn.send({"event": "declined", "reason": f"it runs with other settings: {reason}"})
            return
        text, session = request.get("message"), request.get("session")
        if not isinstance(text, str) or not isinstance(session, str | None):
            conn.send({"event": "error", "message": "bad run request", "code": 2})
            return
        log.info("one-shot from the local socket%s", f", session {session}" if session else "")
        _ASKER.set(_Asker(conn, tty=request.get("tty") is True))

        def stream(delta: str) -> None:
            conn.send({"event": "text", "text": delta})

        ended = await answer(
            self.runtime,
            self._scrub,
            text,
            session,
            terminal=TerminalChannel(out=_ReplyOut(conn)),
            say=lambda line: conn.send({"event": "tool", "line": line}),
            on_text=stream if request.get("stream") is True else None,
        )
        if ended.error is not None:
            conn.send({"event": "error", "message": ended.error, "code": 1})
        else:
            conn.send({"event": "done", "code": 0, "stderr": ended.summary})


def _differences(mine: str, theirs: str) -> str:
    """What differs between two settings fingerprints (`agent.home`), for `agent -v run -m`."""
    import ast

    try:  # a Python literal (repr): literal_eval runs nothing, whatever it is sent
        (my_config, my_env), (their_config, their_env) = map(ast.literal_eval, (mine, theirs))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return "an unreadable description"
    names = sorted(n for n in {*my_env, *their_env} if my_env.get(n) != their_env.get(n))
    found = ["the config file"] if my_config != their_config else []
    return ", ".join(found + names) or "none found"
