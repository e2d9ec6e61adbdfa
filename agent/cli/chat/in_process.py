"""`agent chat` answered in this process (no daemon runs, or it runs with other settings):
the App is built once and kept for the whole chat, each line one turn of the terminal channel
through the same path as `agent run -m` (`agent/runtime/one_shot.py`); the prompt read ahead
at a server of one's own while the first line is typed, as the daemon does.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Callable

from agent.app import App, build_app
from agent.cli.chat.view import STOPPED, PlainView, View
from agent.config import Settings
from agent.daemon.warmup import keep_read_ahead
from agent.runtime.one_shot import Ended, answer
from agent.runtime.turn_setup import Access
from channels.base import (
    ApprovalAnswer,
    ApprovalQuestion,
    ChatRef,
    MayAnswer,
    OutgoingPart,
)
from channels.terminal import TERMINAL_ANSWERS, TerminalChannel


class ChatTerminal(TerminalChannel):
    """The terminal channel as the chat shows it: replies and questions go to the turn's
    view; Ctrl-C at a question stops the answer, as it does anywhere else in a turn."""

    def __init__(self, interrupt: Callable[[], None]) -> None:
        super().__init__()
        self.view: View = PlainView()
        self._interrupt = interrupt

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        self.view.reply(f"[{part.media.kind}: {part.media.source}]" if part.media else part.text)

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        if not self.view.can_ask:
            self.view.note(f"{question.text}\nDenied: no terminal to ask on.")
            return "deny"
        said = await self.view.ask(question.text)
        if said is None:
            self._interrupt()
            return "deny"
        return TERMINAL_ANSWERS.get(said.strip().lower(), "deny")


class InProcess:
    """The chat's turns in this process, on one runtime of the cli channel."""

    def __init__(self, app: App, session: str, interrupt: Callable[[], None]) -> None:
        self._app = app
        self._terminal = ChatTerminal(interrupt)
        self._runtime = app.runtime(self._terminal, Access(open_to_all=True))
        self._session = session
        self._chat_key = ChatRef("cli", f"session:{session}").key  # as answer() names it
        self._task: asyncio.Task[Ended] | None = None
        self._cut = False
        # While the person types, a server of one's own reads the prompt (agent run's too).
        self._reading = asyncio.create_task(keep_read_ahead(lambda: [self._runtime]))

    @classmethod
    async def open(
        cls, settings: Settings, session: str, interrupt: Callable[[], None]
    ) -> InProcess:
        # A turn stopped while LiteLLM opens its stream leaves that coroutine unawaited; the
        # warning would land in the middle of the chat's screen, and means nothing here.
        warnings.filterwarnings(
            "ignore", r"coroutine '.*async_streaming' was never awaited", RuntimeWarning
        )
        return cls(await build_app(settings), session, interrupt)

    async def turn(self, text: str, view: View) -> bool:
        self._terminal.view = view
        self._cut = False
        self._task = asyncio.create_task(
            answer(
                self._runtime,
                self._app.scrub,
                text,
                self._session,
                terminal=self._terminal,
                say=view.tool,
                on_text=view.text if view.streams else None,
            )
        )
        try:
            ended = await self._task
        except asyncio.CancelledError:
            if not self._cut:
                raise  # the chat itself is leaving
            view.reply(STOPPED)
            return True
        finally:
            self._task = None
        if ended.error is not None:
            view.error(f"error: {ended.error}")
            return False
        return True

    def stop(self) -> None:
        """/stop's cancel; before the turn is under way (its history still being read)
        there is nothing for it to stop, and the answer itself is cut instead."""
        if self._task is None or self._task.done():
            return
        if not self._runtime.turns.cancel(self._chat_key):
            self._cut = True
            self._task.cancel()

    async def close(self) -> None:
        self._reading.cancel()
        keeper = self._app.boards
        if keeper is not None and keeper.boards.finite_patterns:
            pins = ", ".join(keeper.boards.finite_patterns)
            wait = f"at most {keeper.boards.pattern_grace_s:g} s"
            print(f"waiting for the pattern on pin {pins} to end ({wait})", file=sys.stderr)
        await self._app.close()
