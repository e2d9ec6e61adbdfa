"""What a Telegram message means for pinclaw: is the bot addressed, what is attached (to be
fetched when its turn runs), and the IncomingMessage the runtime gets. Kept apart from the
adapter's I/O so it can be read (and tested) on its own."""

from __future__ import annotations

import re
from typing import Any

from telegram import (
    Message,
    MessageEntity,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
)

from channels.base import ChatRef, IncomingMessage, RemoteFile
from channels.capabilities import MediaKind


def addressed_to_bot(message: Message, bot_id: int, bot_username: str, group_mode: str) -> bool:
    """Private chats always; groups only when mentioned (or a command is named for the bot:
    /pair@x_bot) or replied to, unless mode is "all"."""
    if message.chat.type == "private" or group_mode == "all":
        return True
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == bot_id:
        return True
    return _mentions(message, bot_id, bot_username)


def _mentions(message: Message, bot_id: int, bot_username: str) -> bool:
    entities = message.parse_entities() if message.text else message.parse_caption_entities()
    handle = f"@{bot_username}".lower()
    for entity, text in entities.items():
        if entity.type == MessageEntity.MENTION and text.lower() == handle:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and text.lower().endswith(handle):
            return True  # "/status@x_bot": a command for this bot in a group
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot_id:
            return True
    return False


def to_incoming(
    message: Message, bot_username: str, files: tuple[RemoteFile, ...] = ()
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
        is_group=message.chat.type != "private",
        message_id=str(message.message_id),
        files=files,
        forwarded_from=_origin(message),
    )


def _origin(message: Message) -> str:
    """Whose words a forwarded message holds ("": not forwarded)."""
    origin = message.forward_origin
    if origin is None:
        return ""
    if isinstance(origin, MessageOriginUser):
        return origin.sender_user.full_name
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name
    if isinstance(origin, MessageOriginChat):
        return f"the chat {origin.sender_chat.title or origin.sender_chat.id}"
    if isinstance(origin, MessageOriginChannel):
        return f"the channel {origin.chat.title or origin.chat.id}"
    return "someone"


def remote_files(message: Message) -> tuple[RemoteFile, ...]:
    """The message's photo, document, audio, video or voice note, not downloaded yet."""
    found: list[tuple[MediaKind, Any, str]] = []
    if message.photo:
        found.append(("IMAGE", message.photo[-1], "photo.jpg"))
    if message.document:
        image = (message.document.mime_type or "").startswith("image/")
        kind: MediaKind = "IMAGE" if image else "DOCUMENT"
        found.append((kind, message.document, message.document.file_name or "file"))
    if message.audio:
        found.append(("AUDIO", message.audio, message.audio.file_name or "audio.mp3"))
    if message.video:
        found.append(("VIDEO", message.video, message.video.file_name or "video.mp4"))
    if message.voice:
        found.append(("VOICE", message.voice, "voice.ogg"))
    return tuple(
        RemoteFile(kind, media.file_id, name, int(media.file_size or 0))
        for kind, media, name in found
    )
