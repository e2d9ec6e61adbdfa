"""The two channels with no chat platform behind them, where nobody can answer a question:

- `HookChannel`, the webhooks' silent turns: a hook with no `to` runs its turn in a chat of
  its own ("http:NAME"), and its reply, kept in the outbox like any other, is logged instead
  of sent.
- `ApiChannel`, the OpenAI-compatible API's: a request's turn runs on it as the key's person
  (agent/conversation/scopes.py reads the sender of an "api" chat as a [people] name), and
  its reply goes back in the HTTP response, not through here.

Every approval on either is a denial, so such a turn does only what needs no one's yes.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, nullcontext

from agent.conversation.scopes import API_CHANNEL
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
from channels.capabilities import ChannelCapabilities

log = logging.getLogger(__name__)

HOOK_CHANNEL = "http"


class _Headless:
    """What both channels do alike: no intake of their own, no files, no typing, no preview,
    every question denied (and logged)."""

    name: str
    capabilities: ChannelCapabilities
    delivery_instructions: str | None = None
    account = ""

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        return None

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, 0, lambda text, _limit: [text])

    async def fetch_file(self, file: RemoteFile, max_bytes: int | None = None) -> bytes:
        raise OSError(f"a chat of {self.name!r} carries no files")

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        return None

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        log.warning("%s: denied, nobody to ask: %s", chat.key, question.text)
        return "deny"

    async def stop_intake(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class HookChannel(_Headless):
    name = HOOK_CHANNEL
    capabilities = ChannelCapabilities(display_name="webhook (the reply is logged)", markup="plain")

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        said = f"[{part.media.kind}: {part.media.name}]" if part.media else part.text
        log.info("hook %s replied: %s", chat.chat_id, said)


class ApiChannel(_Headless):
    name = API_CHANNEL
    capabilities = ChannelCapabilities(
        display_name="an HTTP client (OpenAI's API)", markup="markdown"
    )

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        return None  # the reply is the HTTP response's
