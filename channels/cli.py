"""The terminal channel: `agent run -m` one-shots."""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TextIO

from channels.base import ChatRef, Reply, ReplyStream, Submit
from channels.capabilities import TERMINAL


class TerminalChannel:
    """Prints replies on stdout. Whoever runs the command owns the agent: no allowlist."""

    name = "cli"
    capabilities = TERMINAL
    delivery_instructions: str | None = None

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout

    async def start(self, submit: Submit) -> None:
        return None

    async def send(self, chat: ChatRef, reply: Reply) -> None:
        lines = [reply.text] if reply.text else []
        lines += [f"[{item.kind}: {item.source}]" for item in reply.media]
        print("\n".join(lines), file=self._out, flush=True)

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        return None

    async def stop_intake(self) -> None:
        return None

    async def stop(self) -> None:
        return None
