"""What every channel shares with the runtime: messages in, replies out, capabilities."""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

Markup = Literal["plain", "markdown", "html"]
MediaKind = Literal["IMAGE", "DOCUMENT", "VIDEO", "AUDIO", "VOICE"]
MEDIA_KINDS: tuple[MediaKind, ...] = ("IMAGE", "DOCUMENT", "VIDEO", "AUDIO", "VOICE")


@dataclass(frozen=True)
class ChannelCapabilities:
    """What a channel can show; the prompt's Channel Capabilities section reads it."""

    display_name: str
    markup: Markup = "plain"
    max_message_chars: int = 0  # 0: no limit
    media: frozenset[MediaKind] = frozenset()
    edits: bool = False


@dataclass(frozen=True)
class ChatRef:
    """Where a conversation lives; also the key of its session."""

    channel: str
    chat_id: str
    thread_id: str = ""

    @property
    def key(self) -> str:
        return f"{self.channel}:{self.chat_id}:{self.thread_id}"


@dataclass(frozen=True)
class Attachment:
    kind: MediaKind
    path: Path  # saved inside the workspace inbox
    note: str = ""  # e.g. a voice note's transcript


@dataclass(frozen=True)
class IncomingMessage:
    chat: ChatRef
    sender_id: str
    sender_name: str
    text: str
    attachments: tuple[Attachment, ...] = ()
    is_group: bool = False
    mentions_bot: bool = False
    message_id: str = ""
    sender_username: str = ""


@dataclass(frozen=True)
class OutgoingMedia:
    kind: MediaKind
    source: str  # a URL, or a local path the runtime has confined to the workspace
    is_url: bool = False


@dataclass(frozen=True)
class Reply:
    text: str
    media: tuple[OutgoingMedia, ...] = ()
    reply_to: str = ""  # the message id to answer, when the platform threads replies


Submit = Callable[[IncomingMessage], None]


def sender_allowed(allowed: Collection[str], sender_id: str, username: str = "") -> bool:
    """An allow-list entry is a user id, an @username (any case) or "*" for anyone.

    The runtime decides with it; adapters ask it too before downloading a stranger's files.
    """
    wanted = {entry.lower() for entry in allowed}
    return (
        "*" in wanted
        or sender_id in wanted
        or (bool(username) and f"@{username}".lower() in wanted)
    )


ApprovalAnswer = Literal["approve", "deny", "always"]
# Who pressed the button: (sender id, username) -> may this person answer?
MayAnswer = Callable[[str, str], bool]


@dataclass(frozen=True)
class ApprovalQuestion:
    """An action that waits for the owner: shown with Approve / Deny / Always buttons."""

    id: str  # unique per question; channels put it in the buttons' callback data
    text: str  # what would happen and why it needs asking


class ReplyStream(Protocol):
    """A reply shown while it is written: deltas in, then the final reply replaces it."""

    def push(self, delta: str) -> None: ...

    async def finish(self, reply: Reply) -> None: ...


class Channel(Protocol):
    name: str
    capabilities: ChannelCapabilities
    delivery_instructions: str | None

    async def start(self, submit: Submit) -> None: ...  # submit returns at once

    async def send(self, chat: ChatRef, reply: Reply) -> None: ...

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]: ...

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None: ...

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer: ...  # waits for an allowed person's answer; cancelled on timeout

    async def stop_intake(self) -> None: ...  # no new messages; replies can still be sent

    async def stop(self) -> None: ...
