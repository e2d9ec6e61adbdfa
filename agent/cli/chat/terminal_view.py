"""`agent chat` on a terminal: the line editor (prompt_toolkit: editing, history kept in the
home across runs, multi-line input) and the turn drawn as it happens (rich: the reply as
Markdown while it streams, a spinner with the seconds, tool lines, approvals asked inline).

Imported only when stdin and stdout are a terminal, so neither library costs a script (or
`agent --help`) anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from agent.cli import verbatim
from agent.cli.chat.view import STOPPED, STOPPING, View

PROMPT = "› "
CONTINUATION = "… "
ALLOW = "Allow? [y/N/a(lways)] "  # as the one-shot asks (channels/terminal.py)
HINT = (
    "Enter sends · Alt-Enter (or a line ending in \\) starts a new line · /help · "
    "Ctrl-C stops an answer · Ctrl-D leaves"
)


def _send(event: KeyPressEvent) -> None:
    buffer = event.current_buffer
    if buffer.document.is_cursor_at_the_end and buffer.text.endswith("\\"):
        buffer.delete_before_cursor()
        buffer.insert_text("\n")
    else:
        buffer.validate_and_handle()


def _new_line(event: KeyPressEvent) -> None:
    event.current_buffer.insert_text("\n")


def _clear_or_leave(event: KeyPressEvent) -> None:
    if event.current_buffer.text:
        event.current_buffer.reset()
    else:
        event.app.exit(exception=KeyboardInterrupt, style="class:aborting")


def _keys() -> KeyBindings:
    """Enter sends; Alt-Enter or a trailing backslash goes on to a new line (a paste keeps
    its lines); Ctrl-C clears what was typed, and on an empty line leaves."""
    keys = KeyBindings()
    keys.add("enter")(_send)
    keys.add("escape", "enter")(_new_line)
    keys.add("c-c")(_clear_or_leave)
    return keys


class LineEditor:
    """What the person types: the chat's lines (with history) and the answers to questions
    (without). SIGINT is left to the chat: at the prompt Ctrl-C is a key, not a signal."""

    def __init__(self, history: Path | None) -> None:
        kept: History = FileHistory(str(history)) if history is not None else InMemoryHistory()
        self._lines: PromptSession[str] = PromptSession(
            history=kept, multiline=True, key_bindings=_keys(), prompt_continuation=CONTINUATION
        )
        self._answers: PromptSession[str] = PromptSession()

    async def read(self) -> str | None:
        try:
            return await self._lines.prompt_async(PROMPT, handle_sigint=False)
        except (EOFError, KeyboardInterrupt):
            return None

    async def ask(self, prompt: str) -> str | None:
        try:
            return await self._answers.prompt_async(prompt, handle_sigint=False)
        except KeyboardInterrupt:
            return None
        except EOFError:
            return ""


class _Frame:
    """The live part of the screen: the text streamed so far as Markdown, under it a spinner
    with the seconds since the last thing happened. Rendered at the refresh rate, not per
    delta, so a long reply is not parsed again for every piece."""

    def __init__(self, label: str) -> None:
        self.text = ""
        self.label = label
        self.busy = True
        self._since = time.monotonic()
        self._spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.text.strip():
            yield Markdown(self.text)
        if self.busy:
            seconds = time.monotonic() - self._since
            self._spinner.update(text=Text(f"{self.label} {seconds:.1f} s", style="dim"))
            yield self._spinner


class RichView:
    """One turn on the terminal. The live frame is closed (left as it was written) before a
    tool line or a question is printed, so the screen keeps the order things happened in;
    at the end the reply as sent replaces what streamed of it."""

    streams = True
    can_ask = True

    def __init__(self, console: Console, editor: LineEditor) -> None:
        self._console = console
        self._editor = editor
        self._live: Live | None = None
        self._frame = _Frame("")
        self._parts: list[str] = []

    def _open(self, label: str) -> None:
        self._frame = _Frame(label)
        self._live = Live(
            self._frame,
            console=self._console,
            refresh_per_second=12,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def _close(self, final: RenderableType | None = None) -> None:
        live, self._live = self._live, None
        self._frame.busy = False
        if live is None:
            if final is not None:
                self._console.print(final)
            return
        if final is not None:
            live.update(final)
        live.stop()

    def _print(self, line: str, style: str) -> None:
        self._close()
        self._console.print(Text(line, style=style))
        self._open("working")

    def begin(self) -> None:
        self._parts = []
        self._open("thinking")

    def text(self, delta: str) -> None:
        self._frame.text += delta
        if self._frame.label in ("thinking", "working"):
            self._frame.label = "writing"

    def tool(self, line: str) -> None:
        self._print(line, "red" if ") error " in line else "dim")

    def note(self, line: str) -> None:
        self._print(line, "yellow")

    def reply(self, text: str) -> None:
        self._parts.append(text)

    def error(self, line: str) -> None:
        self._close()
        self._console.print(Text(line, style="bold red"))

    def stopping(self) -> None:
        self._frame.label = STOPPING

    def end(self, *, plain: bool) -> None:
        reply = "\n".join(self._parts)
        streamed = self._frame.text if self._live is not None else ""
        shown: list[RenderableType] = []
        if reply == STOPPED:  # what streamed stays, cut where it was stopped
            shown = [Markdown(streamed)] if streamed.strip() else []
            shown.append(Text(reply, style="yellow"))
        elif reply:
            shown.append(Text(reply) if plain else Markdown(reply))
        elif streamed.strip():
            shown.append(Markdown(streamed))
        self._close(Group(*shown) if shown else None)
        self._console.line()  # a blank line before the next prompt

    async def ask(self, question: str) -> str | None:
        self._close()
        self._console.print(Text(question, style="yellow"))
        try:
            return await self._editor.ask(ALLOW)
        except asyncio.CancelledError:
            self._console.print(Text("(not answered)", style="dim"))
            raise
        finally:
            self._open("working")


class TtyScreen:
    """The chat on a terminal."""

    interactive = True
    hint = HINT

    def __init__(self, history: Path | None) -> None:
        self._console = verbatim.console()  # replies, tool lines, names: data
        self._editor = LineEditor(history)
        self.view: View = RichView(self._console, self._editor)

    async def read(self) -> str | None:
        return await self._editor.read()

    @contextlib.contextmanager
    def during_turn(self) -> Iterator[None]:
        """What is typed while an answer is drawn is not echoed into it (it waits for the
        next prompt); Ctrl-C still interrupts."""
        fd = sys.stdin.fileno()
        try:
            saved = termios.tcgetattr(fd)
        except termios.error:
            yield
            return
        quiet = list(saved)
        quiet[3] = int(quiet[3]) & ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        try:
            yield
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    def say(self, line: str) -> None:
        self._console.print(Text(line, style="dim"))
