"""What `agent chat` needs of a screen and of whoever answers, and the plain screen for a
stdin that is not a terminal (scripts, tests): one turn per line, no colour, no spinner.

Standard library only: the terminal's screen (`agent/cli/chat/terminal_view.py`, rich and
prompt_toolkit) is imported only when there is a terminal, and whoever answers (the daemon's
socket or this process) only once it is chosen.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import Protocol, TextIO

STOPPED = "Stopped."  # what the runtime says of a stopped answer, said here when it could not
STOPPING = "stopping… (Ctrl-C again to leave)"


class View(Protocol):
    """What the person sees of one turn, in the order it happens."""

    streams: bool  # wants the reply's text as the model writes it
    can_ask: bool  # a person is there to answer an approval

    def begin(self) -> None: ...

    def text(self, delta: str) -> None: ...

    def tool(self, line: str) -> None: ...

    def note(self, line: str) -> None: ...

    def reply(self, text: str) -> None: ...

    def error(self, line: str) -> None: ...

    def stopping(self) -> None: ...

    def end(self, *, plain: bool) -> None:
        """The turn is over: show the reply (`plain`: a command's lines, not Markdown)."""

    async def ask(self, question: str) -> str | None:
        """The owner's answer to an approval; None when Ctrl-C was pressed instead."""


class Turns(Protocol):
    """Whoever answers the chat's lines: the daemon over its socket, or this process."""

    async def turn(self, text: str, view: View) -> bool:
        """One line answered (or stopped); False when the turn failed."""

    def stop(self) -> None:
        """Stop the answer being worked on (Ctrl-C), as /stop does on every channel."""

    async def close(self) -> None: ...


class Screen(Protocol):
    """Where the chat's lines come from and its turns are shown."""

    view: View
    interactive: bool
    hint: str  # how to type, send and leave, said once at the start

    async def read(self) -> str | None:
        """The next line to answer; None when the person leaves (end of input)."""

    def during_turn(self) -> contextlib.AbstractContextManager[None]: ...

    def say(self, line: str) -> None:
        """A line outside any turn: the session's name, how to resume it."""


class PlainView:
    """Replies on stdout as they end, everything else on stderr: what `agent run -m` prints,
    so a script reads the answers alone."""

    streams = False
    can_ask = False

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr

    def begin(self) -> None:
        return None

    def text(self, delta: str) -> None:
        return None

    def tool(self, line: str) -> None:
        print(line, file=self._err, flush=True)

    def note(self, line: str) -> None:
        print(line, file=self._err, flush=True)

    def reply(self, text: str) -> None:
        print(text, file=self._out, flush=True)

    def error(self, line: str) -> None:
        print(line, file=self._err, flush=True)

    def stopping(self) -> None:
        print(STOPPING, file=self._err, flush=True)

    def end(self, *, plain: bool) -> None:
        return None

    async def ask(self, question: str) -> str | None:
        return ""  # never asked: can_ask is False, and no answer is a denial


class PlainScreen:
    """Lines from stdin, read by a thread of their own: a pipe a script keeps open waits for
    its next line without holding up the answer to the last one."""

    interactive = False
    hint = ""

    def __init__(self) -> None:
        self.view: View = PlainView()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._reader: threading.Thread | None = None

    async def read(self) -> str | None:
        if self._reader is None:
            self._reader = threading.Thread(
                target=self._pump, args=(asyncio.get_running_loop(),), daemon=True
            )
            self._reader.start()
        return await self._lines.get()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        def hand(line: str | None) -> None:
            with contextlib.suppress(RuntimeError):  # the chat ended meanwhile
                loop.call_soon_threadsafe(self._lines.put_nowait, line)

        for raw in sys.stdin.buffer:
            hand(raw.decode(errors="replace").rstrip("\r\n"))
        hand(None)

    def during_turn(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def say(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)
