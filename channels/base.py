"""What every channel shares with the runtime: messages in, replies out, capabilities."""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from channels.capabilities import ChannelCapabilities, MediaKind


@dataclass(frozen=True)
class ChatRef:
    """Where a conversation lives; also the key of its session."""

    channel: str
    chat_id: str
    thread_id: str = ""

    @property
    def key(self) -> str:
        return f"{self.channel}:{self.chat_id}:{self.thread_id}"

    @classmethod
    def parse(cls, key: str) -> ChatRef:
        """The chat a `key` names. A chat id may hold ":" (the terminal's "session:NAME"), a
        thread id never does; a key without its thread part is read as having none."""
        channel, _, rest = key.partition(":")
        chat_id, sep, thread = rest.rpartition(":")
        return cls(channel, chat_id, thread) if sep else cls(channel, rest)


@dataclass(frozen=True)
class Attachment:
    kind: MediaKind
    path: Path  # saved inside the workspace inbox
    note: str = ""  # e.g. a voice note's transcript


@dataclass(frozen=True)
class RemoteFile:
    """An attachment not fetched yet: the channel downloads it when the turn runs, not in
    its update handler, so a slow download never holds up another chat."""

    kind: MediaKind
    ref: str  # what the channel needs to fetch it: a Telegram file_id, a Discord CDN URL
    name: str
    size: int = 0  # bytes as the platform announced them; 0: unknown


def too_big(max_bytes: int) -> OSError:
    """What a file past a download's limit raises (errno EFBIG): the runtime's note for the
    model says it, as its own refusal of an announced size does."""
    return OSError(errno.EFBIG, f"files over {max_bytes / 2**20:g} MB are not accepted")


@dataclass(frozen=True)
class IncomingMessage:
    chat: ChatRef
    sender_id: str
    sender_name: str
    text: str
    attachments: tuple[Attachment, ...] = ()
    is_group: bool = False
    message_id: str = ""  # the platform's id; a re-delivered message is answered once
    sender_username: str = ""
    files: tuple[RemoteFile, ...] = ()  # become attachments when the turn runs
    # Forwarded into the chat: whose words they are ("Eve", "the channel News"); "": the
    # sender's own. Someone else's words taint the turn (the runtime's taint).
    forwarded_from: str = ""


@dataclass(frozen=True)
class OutgoingMedia:
    kind: MediaKind
    source: str  # a URL, or a local path the runtime has confined to the workspace
    is_url: bool = False
    # A local file's bytes, read by the courier through the workspace's resolver just
    # before sending (never stored): a channel sends these and opens no path itself.
    data: bytes | None = field(default=None, compare=False, repr=False)
    # A document pinclaw made itself (a reply too long for messages): its whole text, kept
    # with the reply in the outbox; no file anywhere, nothing read from the workspace.
    inline: str = field(default="", repr=False)
    # A voice note pinclaw made (a reply read aloud): its OGG/Opus as base64, kept with the
    # reply in the outbox, so a restart between the synthesis and the send sends it once.
    spoken: str = field(default="", repr=False)

    @property
    def name(self) -> str:
        return self.source.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Reply:
    text: str
    media: tuple[OutgoingMedia, ...] = ()
    reply_to: str = ""  # the message id to answer, when the platform threads replies
    # False: no link previews or embeds (a reply of a turn that read untrusted content:
    # a platform that fetches a link to preview it would carry data in its URL out).
    previews: bool = True


@dataclass(frozen=True)
class OutgoingPart:
    """One message on the platform: a reply is sent (and resumed) part by part."""

    text: str = ""
    media: OutgoingMedia | None = None
    reply_to: str = ""
    nonce: str = ""  # the same on every attempt at this part (set by the courier when sending)
    previews: bool = True  # False: sent with link previews and embeds off (Reply.previews)


# What a channel sends instead of a URL file in a part without previews: the platform
# would fetch that URL itself. (agent/runtime/media.py leaves such markers out already.)
LEFT_OUT_LINK = "[left out: a link from a turn that read untrusted content]"


class SendFailed(Exception):
    """A part did not go out, or may not have. `retry_after`: the platform said when to try
    again; `permanent`: the platform refused it and trying again cannot help (the user
    blocked the bot, the chat is gone); `maybe_sent`: the request was written and no answer
    came (a read timeout, a dropped connection): it may have been delivered;
    `token_refused`: the platform refused the bot's token (revoked or replaced): nothing
    went out, and nothing will until the channel starts with its next token. None of them:
    not sent, try again. Each adapter's table says which its errors are."""

    def __init__(
        self,
        reason: str,
        *,
        retry_after: float | None = None,
        permanent: bool = False,
        maybe_sent: bool = False,
        token_refused: bool = False,
    ) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.permanent = permanent
        self.maybe_sent = maybe_sent
        self.token_refused = token_refused


# Stores the message durably and returns; the channel acknowledges the message only after.
# False: not taken (a duplicate, or intake has stopped).
Submit = Callable[[IncomingMessage], Awaitable[bool]]


def reply_parts(
    reply: Reply, max_chars: int, split: Callable[[str, int], list[str]]
) -> list[OutgoingPart]:
    """The text in parts of at most `max_chars` (the first answers `reply_to`), then each
    file as a part of its own; every part keeps the reply's `previews` (a tainted turn's
    reply has none on any of its messages)."""
    texts = split(reply.text, max_chars) if reply.text.strip() else []
    previews = reply.previews
    parts = [
        OutgoingPart(text=text, reply_to=reply.reply_to if index == 0 else "", previews=previews)
        for index, text in enumerate(texts)
    ]
    return parts + [OutgoingPart(media=item, previews=previews) for item in reply.media]


DOCUMENT_NAME = "reply.md"
SUMMARY_LINES = 6
SUMMARY_CHARS = 600


def within_parts(reply: Reply, parts: list[OutgoingPart], max_parts: int) -> list[OutgoingPart]:
    """A reply of more than `max_parts` text parts is sent as a short summary (its first
    lines) and one document holding the whole text, instead of a wall of messages (a 1 MB
    reply would be 257 Telegram messages); its files follow as they are."""
    texts = [part for part in parts if part.media is None]
    if len(texts) <= max_parts:
        return parts
    document = OutgoingMedia("DOCUMENT", DOCUMENT_NAME, inline=reply.text)
    previews = reply.previews
    first = [OutgoingPart(text=_summary(reply.text), reply_to=reply.reply_to, previews=previews)]
    whole = OutgoingPart(media=document, previews=previews)
    return first + [whole] + [p for p in parts if p.media is not None]


def _summary(text: str) -> str:
    lines = text.strip().splitlines()[:SUMMARY_LINES]
    head = "\n".join(lines)[:SUMMARY_CHARS].rstrip()
    if head.count("```") % 2:  # a code block cut open
        head += "\n```"
    size = f"{len(text):,} characters"
    return f"{head}\n…\n(The whole reply, {size}, is in the attached {DOCUMENT_NAME}.)"


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
    always: bool = True  # offer "Always allow" too (a pairing request: Approve / Deny only)
    unanswered: str = ""  # the line shown when the wait ends unanswered ("": a denial)


class ReplyStream(Protocol):
    """A reply shown while it is written: deltas in, then the final reply replaces it."""

    def push(self, delta: str) -> None: ...

    async def finish(self, first: OutgoingPart) -> bool: ...  # False: nothing to replace

    async def discard(self) -> None: ...  # removed: the answer comes later, as a new message


@runtime_checkable
class TakesWebhooks(Protocol):
    """A channel whose platform may post its updates to pinclaw's HTTP server (agent/http/)
    at /channels/NAME/webhook instead of being polled."""

    @property
    def takes_webhooks(self) -> bool: ...  # configured so, and started

    async def receive_webhook(self, headers: Mapping[str, str], body: bytes) -> int:
        """The update taken (stored before this returns): the HTTP status to answer."""
        ...


@runtime_checkable
class SharesIntake(Protocol):
    """A chat platform's bot that several pinclaw processes run at once, one of them taking
    its messages: the others start on `standby` (connected, sending, taking nothing) and the
    one that takes the intake over calls `start_intake`."""

    standby: bool  # set before start(): connect for sending only

    async def start_intake(self) -> None: ...  # take messages (again); a no-op when it does


@runtime_checkable
class Reacting(Protocol):
    """A channel that can mark a person's message with an emoji reaction (pinclaw's 👀 taken,
    ✍️ working, ✅ answered, ❌ failed); one without it says so in a line instead."""

    # Raises on failure; `previous`: the reaction it replaces (where several can stand).
    async def react(
        self, chat: ChatRef, message_id: str, emoji: str, previous: str = ""
    ) -> None: ...


class Channel(Protocol):
    name: str
    capabilities: ChannelCapabilities
    delivery_instructions: str | None

    @property
    def account(self) -> str: ...  # the bot as the platform named it at start ("@x_bot"), or ""

    # `allowed`: the runtime's one allow-list (a stranger's files are not even listed).
    async def start(self, submit: Submit, allowed: MayAnswer) -> None: ...

    def parts(self, reply: Reply) -> list[OutgoingPart]: ...  # split for this platform

    # One attempt; the platform's id of the message (None: it has none). Raises SendFailed.
    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> str | None: ...

    # The bytes, at most `max_bytes` (OSError errno EFBIG past them); OSError if not had.
    async def fetch_file(self, file: RemoteFile, max_bytes: int | None = None) -> bytes: ...

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]: ...

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None: ...

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer: ...  # waits for an allowed person's answer; cancelled on timeout

    async def stop_intake(self) -> None: ...  # no new messages; replies can still be sent

    async def stop(self) -> None: ...
