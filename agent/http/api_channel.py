"""The channel of the OpenAI-compatible API: a request's turn runs on it as the key's person
(agent/conversation/scopes.py reads the sender of an "api" chat as a [people] name). Its
reply goes back in the HTTP response, not through here; a question nobody can answer over
HTTP is denied, so a turn asked by a client does only what needs no one's yes."""

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

_SHOWN = ChannelCapabilities(display_name="an HTTP client (OpenAI's API)", markup="markdown")


class ApiChannel:
    name = API_CHANNEL
    capabilities = _SHOWN
    delivery_instructions: str | None = None
    account = ""

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        return None

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, 0, lambda text, _limit: [text])

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> None:
        return None  # the reply is the HTTP response's

    async def fetch_file(self, file: RemoteFile) -> bytes:
        raise OSError("the API carries no files")

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        return None

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        log.warning("api %s: denied, nobody to ask over HTTP: %s", chat.key, question.text)
        return "deny"

    async def stop_intake(self) -> None:
        return None

    async def stop(self) -> None:
        return None
