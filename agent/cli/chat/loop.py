"""`agent chat`: a conversation in the terminal, one turn of the terminal ("cli") channel per
line, in one session (`--session` resumes a stored one; by default a fresh name, said so it
can be resumed). Served by the running daemon when there is one, as one-shots are
(`agent/cli/chat/through_daemon.py`), else in this process (`agent/cli/chat/in_process.py`).

On a terminal the lines are edited with prompt_toolkit and the turns drawn with rich
(`agent/cli/chat/terminal_view.py`); otherwise each line of stdin is one turn and the output
is plain (`agent/cli/chat/view.py`). Ctrl-C stops the answer being worked on (the runtime's /stop);
a second Ctrl-C, or Ctrl-C or Ctrl-D at an empty prompt, leaves.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from agent import collector
from agent.cli.chat.through_daemon import NoDaemon, ThroughDaemon
from agent.cli.chat.view import PlainScreen, Screen, Turns
from agent.cli.command_name import with_command
from agent.cli.local_client import Unreachable
from agent.home import (
    CHAT_HISTORY_NAME,
    ENV_PREFIX,
    create_private_file,
    default_home,
    find_config_file,
    settings_fingerprint,
)
from channels.capabilities import CHAT_COMMANDS

NO_MODEL = (
    "config error: llm.model: not set; set PINCLAW_LLM__MODEL (e.g. openai/gpt-4o-mini) or "
    "[llm] model in the config file"
)


def fresh_session() -> str:
    """A new chat's session name: when it began, and enough randomness for two at once."""
    return f"chat-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"


def is_command(text: str) -> bool:
    """/new, /stop, /status, /help: answered by the runtime in lines, not Markdown."""
    words = text.split()
    if not words or not words[0].startswith("/"):
        return False
    return words[0][1:].split("@")[0].lower() in dict(CHAT_COMMANDS)


def history_file(home: Path) -> Path | None:
    """The typed lines' history, made 0600 before anything is written to it; None (the
    history lives only as long as the chat) when the home cannot hold it."""
    path = home / CHAT_HISTORY_NAME
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        create_private_file(path)
    except OSError:
        return None
    return path


def run_chat(ctx: click.Context, session: str | None, *, no_daemon: bool) -> int:
    """The whole chat; its exit status (piped: 1 when a turn failed)."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    chat = Chat(ctx, session or fresh_session(), resumed=session is not None)
    code = asyncio.run(chat.run(interactive=interactive, no_daemon=no_daemon))
    if chat.in_process:  # state.db closed, history written: main() skips the slow teardown
        ctx.obj["leave_at_once"] = True
    return code


class Chat:
    """The loop: a line read, its turn answered (and stoppable), until the person leaves."""

    def __init__(self, ctx: click.Context, session: str, *, resumed: bool) -> None:
        self._ctx = ctx
        self._session = session
        self._resumed = resumed
        self._turns: Turns | None = None
        self._screen: Screen = PlainScreen()
        self._main: asyncio.Task[Any] | None = None
        self._answering = False
        self._stopping = False
        self._leaving = False
        self.in_process = False

    async def run(self, *, interactive: bool, no_daemon: bool) -> int:
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        loop.add_signal_handler(signal.SIGINT, self._interrupt)
        failed = False
        try:
            chosen = await self._choose(no_daemon)
            if isinstance(chosen, int):
                return chosen
            self._turns = chosen
            collector.release()  # started: the conversation may go on for hours
            self._screen = self._make_screen(interactive)
            self._greet()
            while (text := await self._screen.read()) is not None:
                if text.strip():
                    failed = not await self._one(text) or failed
        except asyncio.CancelledError:
            if not self._leaving or self._main is None:
                raise
            self._main.uncancel()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            if self._turns is not None:
                await self._turns.close()
        if self._turns is not None:
            resume = with_command(f"agent chat --session {self._session}")
            self._screen.say(f"resume with: {resume}")
        return 1 if failed and not self._screen.interactive else 0

    async def _choose(self, no_daemon: bool) -> Turns | int:
        """The daemon when one takes the chat's settings (asked with /help, which no model
        answers), else this process. An exit status when neither may answer."""
        fingerprint = None if no_daemon else self._fingerprint()
        if fingerprint is not None:
            daemon = ThroughDaemon(
                default_home(os.environ), fingerprint, self._session, interrupt=self._interrupt
            )
            try:
                if await daemon.command("/help") is not None:
                    return daemon
            except Unreachable as exc:
                click.echo(f"error: {exc}", err=True)
                return 2
            except NoDaemon as exc:
                if self._ctx.obj["verbose"] and str(exc) != "no daemon runs":
                    click.echo(f"the daemon declined: {exc}; answering here", err=True)
            except OSError:
                pass  # it went away meanwhile: answer here
        return await self._local()

    def _fingerprint(self) -> str | None:
        """What the daemon compares with its own settings (as `agent run -m` sends it); None
        when a config file named does not exist (loading the settings here says so)."""
        env = os.environ
        config_file = find_config_file(self._ctx.obj["config"], env)
        named = self._ctx.obj["config"] is not None or bool(env.get(f"{ENV_PREFIX}CONFIG"))
        if named and not config_file.exists():
            return None
        return settings_fingerprint(config_file, env)

    async def _local(self) -> Turns | int:
        from agent.cli.chat.in_process import InProcess

        settings = self._ctx.obj["load"](self._ctx)
        if not settings.llm.model:
            click.echo(NO_MODEL, err=True)
            return 2
        self.in_process = True
        return await InProcess.open(settings, self._session, self._interrupt)

    def _make_screen(self, interactive: bool) -> Screen:
        if not interactive:
            return PlainScreen()
        from agent.cli.chat.terminal_view import TtyScreen

        return TtyScreen(history_file(default_home(os.environ)))

    def _greet(self) -> None:
        where = "in this process" if self.in_process else "by the daemon"
        new = "" if self._resumed else " (new)"
        self._screen.say(f"pinclaw chat · session {self._session}{new} · answered {where}")
        if self._screen.hint:
            self._screen.say(self._screen.hint)

    async def _one(self, text: str) -> bool:
        view = self._screen.view
        self._answering, self._stopping = True, False
        view.begin()
        try:
            with self._screen.during_turn():
                assert self._turns is not None
                try:
                    return await self._turns.turn(text, view)
                except NoDaemon:  # the daemon stopped (or restarted otherwise) since
                    view.note("no daemon answers now: the chat goes on in this process")
                    local = await self._local()
                    if isinstance(local, int):
                        return False
                    self._turns = local
                    return await local.turn(text, view)
        finally:
            self._answering = False
            view.end(plain=is_command(text))

    def _interrupt(self) -> None:
        """Ctrl-C: the first stops the answer; another (or one with no answer running)
        leaves the chat."""
        if self._answering and not self._stopping and self._turns is not None:
            self._stopping = True
            self._screen.view.stopping()
            self._turns.stop()
            return
        self._leaving = True
        if self._main is not None:
            self._main.cancel()
