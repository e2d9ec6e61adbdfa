"""The channel of webhooks' silent turns: a hook with no `to` runs its turn in a chat of its
own ("http:NAME"), and its reply, kept in the outbox like any other, is logged instead of
sent. Nobody can answer a question there: every approval is a denial, so a silent turn does
only what needs no one's yes."""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager, nullcontext

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
_SHOWN = ChannelCapabilities(display_name="webhook (the reply is logged)", markup="plain")


class HookChannel:
    name = HOOK_CHANNEL
    capabilities = _SHOWN
    delivery_instructions: str | None = None
    account = ""

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        return None

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, 0, lambda text, _limit: [text])

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        said = f"[{part.media.kind}: {part.media.name}]" if part.media else part.text
        log.info("hook %s replied: %s", chat.chat_id, said)

    async def fetch_file(self, file: RemoteFile) -> bytes:
        raise OSError("a webhook carries no files")

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        return None

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        log.warning("hook %s: denied, nobody to ask: %s", chat.chat_id, question.text)
        return "deny"

    async def stop_intake(self) -> None:
        return None

    async def stop(self) -> None:
        return None
