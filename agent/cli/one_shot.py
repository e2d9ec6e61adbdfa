"""`agent run -m` without a running daemon: one turn in this process, through the same runtime
path as every channel (the cli one); agent/cli/local_client.py hands it to the daemon instead.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from agent import collector
from agent.app import build_app
from agent.cli.one_shot_screen import PlainScreen
from agent.config import Settings
from agent.model.profiles.routes import load_first_call_modules
from agent.runtime.one_shot import answer
from agent.runtime.turn_setup import Access
from channels.base import ApprovalAnswer, ApprovalQuestion, ChatRef, MayAnswer, OutgoingPart
from channels.terminal import TerminalChannel

if TYPE_CHECKING:
    from agent.cli.one_shot_screen import Screen


class OneShotTerminal(TerminalChannel):
    """The terminal channel with the screen's spinner put away before the reply and a
    question, which share the terminal with it."""

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self._screen = screen

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        self._screen.idle()
        await super().send_part(chat, part)

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        self._screen.idle()
        try:
            return await super().ask_approval(chat, question, may_answer)
        finally:
            self._screen.busy("thinking")


async def run_once(
    settings: Settings, text: str, *, session: str | None = None, screen: Screen | None = None
) -> int:
    """Answer `text` in this process: reply on stdout, tool activity on stderr (`screen`: a
    terminal's spinner and colours, or plain lines). Exit status."""
    screen = screen or PlainScreen()
    channel = OneShotTerminal(screen)
    app = await build_app(settings)
    try:
        load_first_call_modules(settings.llm)
        collector.release()  # start-up is done: what it loaded lives until the exit
        runtime = app.runtime(channel, Access(open_to_all=True))
        screen.busy("thinking")
        ended = await answer(runtime, app.scrub, text, session, terminal=channel, say=screen.tool)
    finally:
        screen.idle()
        if app.boards is not None and app.boards.boards.finite_patterns:
            pins = ", ".join(app.boards.boards.finite_patterns)
            wait = f"at most {app.boards.boards.pattern_grace_s:g} s"
            screen.note(f"waiting for the pattern on pin {pins} to end ({wait})")
        await app.close()
    if ended.error is not None:
        screen.note(f"error: {ended.error}")
        return 1
    if ended.summary:
        screen.note(ended.summary)
    return 0


def leave(code: int) -> NoReturn:
    """Exit once the one-shot is done and everything is written (state.db closed, output
    flushed), without tearing down the interpreter: freeing LiteLLM's and the HTTP
    clients' objects one by one took 1.4–2 s after the reply was already printed."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
