"""`agent chat` served by the running daemon: each line is one "run" request on a connection
of its own (`agent/daemon/one_shot_op.py`), in the chat's session, which the daemon keeps in
state.db. The reply's text streams back as `text` events; tool lines, questions and the
reply as for `agent run -m` (`agent/cli/local_client.py`, whose connect and token this uses).

No pydantic, no LiteLLM: while a daemon runs, the chat starts as fast as a one-shot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.cli.chat.view import STOPPED, View
from agent.cli.local_client import GONE, Unreachable, connect, token
from agent.daemon.local_server import MAX_LINE
from tools.background import stop_tasks

STOP_GRACE_S = 3.0  # /stop sent and the turn still runs: hang up, the daemon then cancels it


class NoDaemon(Exception):
    """No daemon takes the chat (none runs, or it runs with other settings): answer here."""


class _Events:
    """The daemon's events on one connection; a line may be awaited while a question is
    asked, and is then the next one read."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._pending: asyncio.Future[bytes] | None = None

    def arriving(self) -> asyncio.Future[bytes]:
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._reader.readline())
        return self._pending

    async def next(self) -> dict[str, Any] | None:
        """The next event; None when the daemon hung up."""
        try:
            line = await self.arriving()
        except (ConnectionError, ValueError):
            return None
        finally:
            self._pending = None
        if not line:
            return None
        value = json.loads(line)
        return value if isinstance(value, dict) else {}

    def drop(self) -> None:
        if self._pending is not None:
            self._pending.cancel()


class ThroughDaemon:
    """The chat's turns in the daemon. `interrupt`: what Ctrl-C at a question does."""

    def __init__(
        self, home: Path, fingerprint: str, session: str, *, interrupt: Callable[[], None]
    ) -> None:
        self._home = home
        self._fingerprint = fingerprint
        self._session = session
        self._interrupt = interrupt
        self._writer: asyncio.StreamWriter | None = None
        self._cut = False
        self._stopping: asyncio.Task[None] | None = None

    def _request(self, message: str, *, tty: bool, stream: bool) -> bytes:
        request = {
            "op": "run",
            "message": message,
            "session": self._session,
            "settings": self._fingerprint,
            "tty": tty,
            "stream": stream,
            "token": token(self._home),
        }
        return json.dumps(request, ensure_ascii=False).encode() + b"\n"

    async def _open(self, request: bytes) -> tuple[_Events, asyncio.StreamWriter]:
        """A connection with `request` sent. NoDaemon when none listens; Unreachable (from
        `connect`) when the socket is another user's."""
        sock = connect(self._home)
        if sock is None:
            raise NoDaemon("no daemon runs")
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE)
        writer.write(request)
        await writer.drain()
        return _Events(reader), writer

    async def command(self, text: str) -> dict[str, Any] | None:
        """A chat command (/help, /stop) on a connection of its own: its last event.
        NoDaemon when the daemon declines (other settings) or none runs."""
        events, writer = await self._open(self._request(text, tty=False, stream=False))
        try:
            while (event := await events.next()) is not None:
                if event.get("event") == "declined":
                    raise NoDaemon(str(event.get("reason", "")))
                if event.get("event") in ("done", "error"):
                    return event
            return None
        finally:
            writer.close()

    async def turn(self, text: str, view: View) -> bool:
        self._cut = False
        request = self._request(text, tty=view.can_ask, stream=view.streams)
        events, writer = await self._open(request)
        self._writer = writer
        try:
            return await self._follow(events, writer, view)
        except ConnectionError:
            return self._gone(view)
        finally:
            events.drop()
            writer.close()
            self._writer = None
            if self._stopping is not None:
                self._stopping.cancel()
                self._stopping = None

    def _gone(self, view: View) -> bool:
        if self._cut:
            view.reply(STOPPED)
            return True
        view.error(GONE)
        return False

    async def _follow(self, events: _Events, writer: asyncio.StreamWriter, view: View) -> bool:
        while (event := await events.next()) is not None:
            kind = event.get("event")
            if kind == "text":
                view.text(str(event.get("text", "")))
            elif kind == "tool":
                view.tool(str(event.get("line", "")))
            elif kind == "note":
                view.note(str(event.get("line", "")))
            elif kind == "reply":
                view.reply(str(event.get("text", "")).removesuffix("\n"))
            elif kind == "ask":
                await self._ask(event, events, writer, view)
            elif kind == "done":
                return True
            elif kind == "error":
                view.error(f"error: {event.get('message', '')}")
                return False
            elif kind == "declined":
                raise NoDaemon(str(event.get("reason", "")))
        return self._gone(view)

    async def _ask(
        self, event: dict[str, Any], events: _Events, writer: asyncio.StreamWriter, view: View
    ) -> None:
        """The question on this terminal; when the daemon speaks first (it timed out, or the
        answer was stopped), the question is given up."""
        asking = asyncio.ensure_future(view.ask(str(event.get("text", ""))))
        try:
            either: set[asyncio.Future[Any]] = {asking, events.arriving()}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not asking.done():
                await stop_tasks(asking)
        if asking.cancelled():
            return
        said = asking.result()
        if said is None:  # Ctrl-C at the question: no, and stop the answer
            self._interrupt()
        answer = {"id": event.get("id"), "answer": said or ""}
        writer.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
        await writer.drain()

    def stop(self) -> None:
        if self._writer is not None and self._stopping is None:
            self._stopping = asyncio.create_task(self._stop(self._writer))

    async def _stop(self, writer: asyncio.StreamWriter) -> None:
        """/stop in the chat's session, as any channel stops an answer; when the turn goes
        on regardless (it had not started yet), the connection is closed: the daemon
        cancels a turn whose client went away."""
        with contextlib.suppress(OSError, NoDaemon, Unreachable, ValueError):
            await self.command("/stop")
        await asyncio.sleep(STOP_GRACE_S)
        if self._writer is writer:
            self._cut = True
            writer.close()

    async def close(self) -> None:
        return None
