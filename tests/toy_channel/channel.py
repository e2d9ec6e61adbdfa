"""The toy channel's adapter: channels/base.py's Channel in memory. The test is the platform:
`say` is a person writing (handed to the runtime's submit, as an adapter does with an
update), `press` a person pressing an approval button, and `shown` what the chats show:
every part sent and every question asked, in order."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar, Literal

from channels.base import (
    ApprovalAnswer,
    ApprovalQuestion,
    ChatRef,
    IncomingMessage,
    MayAnswer,
    OutgoingPart,
    RemoteFile,
    Reply,
    ReplyStream,
    Submit,
    reply_parts,
)
from channels.config import ChannelSection
from channels.text import split_message
from toy_channel.kind import TOY


class ToySettings(ChannelSection):
    """[channels.toy]: the keys every channel has, and how groups are heard."""

    group_mode: Literal["mention", "all"] = "mention"
    bot_name: str = "toy_bot"


@dataclass
class Shown:
    """One message in a chat: a part sent, or an approval question with its buttons."""

    chat: ChatRef
    text: str
    buttons: tuple[str, ...] = ()
    answer: str = ""  # the question's, once pressed


@dataclass(frozen=True)
class Press:
    answer: ApprovalAnswer
    by: str  # who pressed


class ToyChannel:
    name = TOY.name
    capabilities = TOY.capabilities
    delivery_instructions = TOY.delivery_instructions
    built: ClassVar[list[ToyChannel]] = []  # every one the registry made: the test's handle

    def __init__(self, settings: ToySettings) -> None:
        self.settings = settings
        self.shown: list[Shown] = []
        self.refused_presses: list[Press] = []
        self._presses: asyncio.Queue[Press] = asyncio.Queue()
        self._submit: Submit | None = None
        self._ids = itertools.count(1)
        ToyChannel.built.append(self)

    @property
    def account(self) -> str:
        return f"@{self.settings.bot_name}"

    # -- the platform's side, driven by the test --------------------------------------------

    async def say(self, chat_id: str, sender: str, text: str) -> bool:
        """`sender` writes `text` in `chat_id` (a "#group", or their own name: privately).
        In a group heard in "mention" mode only a message naming the bot reaches the
        runtime, without the mention. True: the runtime took it."""
        group = chat_id.startswith("#")
        mention = self.account
        if group and self.settings.group_mode == "mention" and mention not in text:
            return False
        assert self._submit is not None, "the channel has not started"
        message = IncomingMessage(
            chat=ChatRef(self.name, chat_id),
            sender_id=sender,
            sender_name=sender.title(),
            text=text.replace(mention, "").strip(),
            is_group=group,
            message_id=str(next(self._ids)),
            sender_username=sender,
        )
        return await self._submit(message)

    def press(self, answer: ApprovalAnswer, by: str) -> None:
        """`by` presses a button of the question asked next (or waiting now)."""
        self._presses.put_nowait(Press(answer, by))

    def said_in(self, chat_id: str) -> list[str]:
        return [shown.text for shown in self.shown if shown.chat.chat_id == chat_id]

    # -- Channel ----------------------------------------------------------------------------

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        self._submit = submit

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, self.capabilities.max_message_chars, split_message)

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> str | None:
        self.shown.append(Shown(chat, part.text))
        return str(next(self._ids))

    async def fetch_file(self, file: RemoteFile, max_bytes: int | None = None) -> bytes:
        raise OSError("the toy platform keeps no files")

    @contextlib.asynccontextmanager
    async def _no_typing(self) -> AsyncIterator[None]:
        yield

    def typing(self, chat: ChatRef) -> contextlib.AbstractAsyncContextManager[None]:
        return self._no_typing()

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        return None

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """The question with its buttons in `chat`; the first press by someone who may
        answer decides (anyone else's is refused, as a real adapter's toast says)."""
        buttons = ("Approve", "Deny", "Always allow") if question.always else ("Approve", "Deny")
        shown = Shown(chat, question.text, buttons)
        self.shown.append(shown)
        while True:
            press = await self._presses.get()
            if may_answer(press.by, press.by):
                shown.answer = press.answer
                return press.answer
            self.refused_presses.append(press)

    async def stop_intake(self) -> None:
        self._submit = None

    async def stop(self) -> None:
        self._submit = None
