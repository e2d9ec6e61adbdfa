"""What a Telegram message means for pinclaw: is the bot addressed, what was attached, and
the IncomingMessage the runtime gets. Kept apart from the adapter's I/O so it can be read
(and tested) on its own."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from telegram import Message, MessageEntity

from channels.base import Attachment, ChatRef, IncomingMessage, MediaKind

log = logging.getLogger(__name__)

INBOX = "inbox"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def addressed_to_bot(message: Message, bot_id: int, bot_username: str, group_mode: str) -> bool:
    """Private chats always; groups only when mentioned or replied to, unless mode is "all"."""
    if message.chat.type == "private" or group_mode == "all":
        return True
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == bot_id:
        return True
    return _mentions(message, bot_id, bot_username)


def _mentions(message: Message, bot_id: int, bot_username: str) -> bool:
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    for entity, text in entities.items():
        if entity.type == MessageEntity.MENTION and text.lower() == f"@{bot_username}".lower():
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True
    return False


def to_incoming(
    message: Message, bot_username: str, attachments: tuple[Attachment, ...] = ()
) -> IncomingMessage:
    user = message.from_user
    assert user is not None
    text = message.text or message.caption or ""
    text = re.sub(rf"@{re.escape(bot_username)}\b", "", text, flags=re.I).strip()
    thread = str(message.message_thread_id) if message.is_topic_message else ""
    return IncomingMessage(
        chat=ChatRef("telegram", str(message.chat.id), thread),
        sender_id=str(user.id),
        sender_name=user.full_name,
        sender_username=user.username or "",
        text=text,
        attachments=attachments,
        is_group=message.chat.type != "private",
        mentions_bot=True,
        message_id=str(message.message_id),
    )


Transcriber = Callable[[Path], Awaitable[str]]


async def attachments_of(
    message: Message, workspace: Path, transcribe: Transcriber | None
) -> tuple[Attachment, ...]:
    """Download the message's photo, document, audio, video or voice note into the inbox."""
    found: list[tuple[MediaKind, object, str]] = []
    if message.photo:
        found.append(("IMAGE", message.photo[-1], "photo.jpg"))
    if message.document:
        found.append(("DOCUMENT", message.document, message.document.file_name or "file"))
    if message.audio:
        found.append(("AUDIO", message.audio, message.audio.file_name or "audio.mp3"))
    if message.video:
        found.append(("VIDEO", message.video, message.video.file_name or "video.mp4"))
    if message.voice:
        found.append(("VOICE", message.voice, "voice.ogg"))
    saved: list[Attachment] = []
    inbox = workspace / INBOX
    inbox.mkdir(parents=True, exist_ok=True)
    for kind, media, name in found:
        safe = _UNSAFE.sub("_", name).strip("._") or "file"
        path = inbox / f"telegram-{message.chat.id}-{message.message_id}-{safe}"
        telegram_file = await media.get_file()  # type: ignore[attr-defined]
        await telegram_file.download_to_drive(path)
        saved.append(Attachment(kind, path, await _note(kind, path, transcribe)))
    return tuple(saved)


async def _note(kind: MediaKind, path: Path, transcribe: Transcriber | None) -> str:
    if kind != "VOICE":
        return ""
    if transcribe is None:
        return "(a voice note, saved there; no transcription is configured)"
    try:
        return f"(voice note transcript: {await transcribe(path)})"
    except Exception as exc:
        log.warning("telegram: transcription failed: %s", exc)
        return "(a voice note, saved there; transcription failed)"
