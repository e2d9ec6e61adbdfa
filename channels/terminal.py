"""The terminal channel: `agent run -m` one-shots, and each line of `agent chat`."""

from __future__ import annotations

import asyncio
import sys
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TextIO

from channels.base import (
    ApprovalAnswer,
    ApprovalQuestion,
    ChatRef,
    MayAnswer,
    OutgoingPart,
    RemoteFile,
    Reply,
    ReplyStream,
    Submit,
    reply_parts,
)
from channels.capabilities import TERMINAL

# What may be typed at "Allow? [y/N/a(lways)]", here or at a client of the local daemon;
# anything else is a no.
TERMINAL_ANSWERS: dict[str, ApprovalAnswer] = {"y": "approve", "yes": "approve", "a": "always"}


class TerminalChannel:
    """Prints replies on stdout. Whoever runs the command owns the agent: no allowlist."""

    name = "cli"
    capabilities = TERMINAL
    delivery_instructions: str | None = None
    account = ""

    def __init__(self, out: TextIO | None = None, ask_in: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._in = ask_in or sys.stdin

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        return None

    async def send(self, chat: ChatRef, reply: Reply) -> None:
        for part in self.parts(reply):
            await self.send_part(chat, part)

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, 0, lambda text, _limit: [text])

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        line = f"[{part.media.kind}: {part.media.source}]" if part.media else part.text
        print(line, file=self._out, flush=True)

    async def fetch_file(self, file: RemoteFile, max_bytes: int | None = None) -> bytes:
        raise OSError("the terminal has no files to fetch")

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        return None

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """y/N/a on the terminal when a person is there to answer; otherwise a denial."""
        if not self._in.isatty():
            print(f"{question.text}\nDenied: no terminal to ask on.", file=sys.stderr, flush=True)
            return "deny"
        print(f"{question.text}\nAllow? [y/N/a(lways)] ", end="", file=sys.stderr, flush=True)
        line = await asyncio.to_thread(self._in.readline)
        return TERMINAL_ANSWERS.get(line.strip().lower(), "deny")

    async def stop_intake(self) -> None:
        return None

    async def stop(self) -> None:
        return None
