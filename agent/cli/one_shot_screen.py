"""What `agent run -m` shows on stderr besides the reply: tool lines, notes, a spinner.

On a terminal a cold one-shot spins while it starts (loading the model's client) and
until the reply, and its tool lines are coloured (ok / error); piped, the same lines are plain
text and there is no spinner, so nothing of this lands in a script's output. The daemon's thin
client (agent/cli/local_client.py) colours its tool lines with the same `paint` and spins with
`TextSpinner`. At import only what Python has loaded by then (the thin client pays for
anything more); rich only once stderr is a terminal.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol, TextIO

    from rich.live import Live

    class Screen(Protocol):
        def busy(self, label: str) -> None:
            """The spinner, saying `label` (shown again when it was hidden)."""

        def idle(self) -> None:
            """No spinner: before the reply or a question."""

        def tool(self, line: str) -> None: ...

        def note(self, line: str) -> None: ...


DIM, GREEN, RED, CYAN, RESET = "\x1b[2m", "\x1b[32m", "\x1b[1;31m", "\x1b[36m", "\x1b[0m"


def on_terminal(stream: TextIO) -> bool:
    """A person watches `stream`: a terminal that is not "dumb"."""
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def paint(line: str) -> str:
    """A tool line in colour: dim, its outcome green (ok), red (error) or plain (skipped);
    NO_COLOR: as is."""
    if os.environ.get("NO_COLOR"):
        return line
    found = _tool_line_parts(line)
    if found is None:
        return f"{DIM}{line}{RESET}"
    head, outcome, tail = found
    colour = {"ok": GREEN, "error": RED}.get(outcome, "")
    return f"{DIM}{head}{RESET}{colour}{outcome}{RESET}{DIM}{tail}{RESET}"


def _tool_line_parts(line: str) -> tuple[str, str, str] | None:
    """`  tool shell(command="ls") ok 0.01 s` (agent/runtime/one_shot.py's describe_event)
    as its call, its outcome and its time; None for any other line."""
    call, closed, rest = line.rpartition(") ")
    outcome, _, seconds = rest.partition(" ")
    number, unit = seconds[:-2], seconds[-2:]
    if not closed or outcome not in ("ok", "error", "skipped") or unit != " s":
        return None
    if not number or number.strip("0123456789."):
        return None
    return f"{call}{closed}", outcome, f" {seconds}"


def paint_note(line: str) -> str:
    """Any other line on stderr: an error red, the rest (how the turn ended...) dim."""
    if os.environ.get("NO_COLOR"):
        return line
    return f"{RED if line.startswith('error:') else DIM}{line}{RESET}"


class PlainScreen:
    """Stderr that is no terminal: the lines as they are, no spinner."""

    def busy(self, label: str) -> None:
        return None

    def idle(self) -> None:
        return None

    def tool(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def note(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)


class RichScreen:
    """A terminal's stderr: rich's spinner, lines printed above it. While it spins, stderr is
    routed above it too (a warning logged, a config error), so nothing breaks its line."""

    def __init__(self) -> None:
        from rich.spinner import Spinner

        from agent.cli import verbatim

        self._console = verbatim.console(stderr=True, soft_wrap=True)  # the terminal wraps
        self._spinner = Spinner("dots", style="cyan")
        self._live: Live | None = None

    def busy(self, label: str) -> None:
        from rich.live import Live
        from rich.text import Text

        self._spinner.update(text=Text(label, style="dim"))
        if self._live is None:
            self._live = Live(
                self._spinner,
                console=self._console,
                transient=True,
                refresh_per_second=12,
                redirect_stdout=False,
                redirect_stderr=True,
            )
            self._live.start(refresh=True)

    def idle(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def tool(self, line: str) -> None:
        from rich.text import Text

        self._console.print(Text.from_ansi(paint(line)))

    def note(self, line: str) -> None:
        from rich.text import Text

        self._console.print(Text.from_ansi(paint_note(line)))


class open_screen:  # used as a function: `with open_screen() as screen`
    """The one-shot's screen, spinning ("starting") on a terminal until the reply (a class:
    contextlib's import costs the thin client, which shares this module, a tenth)."""

    def __enter__(self) -> Screen:
        self._screen: Screen = RichScreen() if on_terminal(sys.stderr) else PlainScreen()
        self._screen.busy("starting")
        return self._screen

    def __exit__(self, *exc: object) -> None:
        self._screen.idle()


class TextSpinner:
    """The daemon's client's spinner, standard library only: a frame per `tick` on a
    terminal's stderr, erased (`clear`) before anything else is written there or on stdout."""

    def __init__(self, err: TextIO, label: str = "thinking") -> None:
        utf8 = (err.encoding or "").lower().replace("-", "") == "utf8"
        frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if utf8 else "|/-\\"
        plain = bool(os.environ.get("NO_COLOR"))  # else as rich's spinner looks
        self._frames = list(frames) if plain else [f"{CYAN}{frame}{RESET}" for frame in frames]
        self._err = err
        self._label = label if plain else f"{DIM}{label}{RESET}"
        self._since = time.monotonic()
        self._shown = False

    def tick(self) -> None:
        frame = self._frames[int((time.monotonic() - self._since) * 12) % len(self._frames)]
        self._err.write(f"\r{frame} {self._label}")
        self._err.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._err.write("\r\x1b[2K")
            self._err.flush()
            self._shown = False
