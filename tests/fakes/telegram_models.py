"""Plain data of the Telegram double: the bot's identity, the records tests read, the error
shape, and how request parameters are read and checked the way the Bot API does it.

Nothing here holds state or imports the other ``telegram_*`` modules except the HTML rules,
so every one of them can use it (the layering is models <- files <- state <- methods and
updates <- server).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from fakes.telegram_html import render_text

__all__ = [
    "ACTIONS",
    "BOT_ID",
    "BOT_USER",
    "BOT_USERNAME",
    "MEDIA",
    "NOT_MODIFIED",
    "REACTIONS",
    "ApiCall",
    "ApiError",
    "CallbackAnswer",
    "ChatAction",
    "SentMessage",
    "Upload",
    "buttons",
    "chat_id_param",
    "int_param",
    "json_param",
    "render",
]

BOT_ID = 999
BOT_USERNAME = "pinclaw_test_bot"
BOT_USER = {"id": BOT_ID, "is_bot": True, "first_name": "Pinclaw Test", "username": BOT_USERNAME}
# The emoji a bot may react with (Bot API ReactionTypeEmoji); anything else: REACTION_INVALID.
_REACTION_LIST = (
    "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 "
    "🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 "
    "💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡"
)
REACTIONS = frozenset(_REACTION_LIST.split())
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are"
    " exactly the same as a current content and reply markup of the message"
)
ACTIONS = re.compile(
    r"typing|choose_sticker|find_location|record_(video|voice|video_note)"
    r"|upload_(photo|video|voice|document|video_note)"
)
MEDIA = {  # method -> (field, folder, default extension, default mime type)
    "sendPhoto": ("photo", "photos", ".jpg", "image/jpeg"),
    "sendDocument": ("document", "documents", ".bin", "application/octet-stream"),
    "sendVideo": ("video", "videos", ".mp4", "video/mp4"),
    "sendAudio": ("audio", "music", ".mp3", "audio/mpeg"),
    "sendVoice": ("voice", "voice", ".oga", "audio/ogg"),
}


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart request."""

    filename: str | None
    data: bytes
    content_type: str | None = None


@dataclass
class SentMessage:
    """One message the bot sent, as the chat shows it now (latest edit applied)."""

    method: str
    chat_id: int | str
    message_id: int
    text: str | None = None  # the text or caption as sent, markup included
    plain: str | None = None  # what the user reads: the markup parsed away
    parse_mode: str | None = None
    reply_to_message_id: int | None = None
    message_thread_id: int | None = None
    filename: str | None = None
    data: bytes | None = None
    file_ref: str | None = None  # URL or file_id sent instead of an upload
    reply_markup: Any = None
    edits: list[str | None] = field(default_factory=list)  # earlier texts, oldest first
    at: float = field(default_factory=time.monotonic)  # when it arrived, for benchmarks
    deleted: bool = False
    params: dict[str, Any] = field(default_factory=dict)


def buttons(message: SentMessage) -> dict[str, str]:
    """The inline buttons the message shows: label -> callback data."""
    rows = (message.reply_markup or {}).get("inline_keyboard", [])
    return {button["text"]: button["callback_data"] for row in rows for button in row}


@dataclass(frozen=True)
class ChatAction:
    """A sendChatAction ("typing" ...)."""

    chat_id: int | str
    action: str
    message_thread_id: int | None = None


@dataclass(frozen=True)
class CallbackAnswer:
    """An answerCallbackQuery: what the user who pressed the button was shown."""

    callback_query_id: str
    user_id: int  # who pressed
    text: str | None = None  # the toast (or alert) text; None shows nothing
    show_alert: bool = False


@dataclass(frozen=True)
class ApiCall:
    """Every request, accepted or not, with the HTTP status it got."""

    method: str
    params: dict[str, Any]
    status: int
    description: str | None = None


class ApiError(Exception):
    """An error answer in Telegram's body shape."""

    def __init__(self, status: int, description: str, **parameters: Any) -> None:
        super().__init__(description)
        self.status, self.description, self.parameters = status, description, parameters


def int_param(params: dict[str, Any], name: str) -> int | None:
    """An optional integer parameter; garbage is a 400 like Telegram's."""
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"Bad Request: invalid {name} specified") from None


def json_param(params: dict[str, Any], name: str) -> Any:
    """A JSON-serialized parameter (form bodies send objects as JSON strings)."""
    value = params.get(name)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ApiError(400, f"Bad Request: can't parse {name} JSON object") from None


def chat_id_param(params: dict[str, Any]) -> int | str:
    """``chat_id``: an integer or an ``@channelusername``."""
    value = params.get("chat_id")
    if value is None or value == "":
        raise ApiError(400, "Bad Request: chat_id is empty")
    if isinstance(value, str) and value.startswith("@"):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, "Bad Request: chat not found") from None


def render(params: dict[str, Any], text: str, *, caption: bool) -> tuple[str, list[Any]]:
    """The text a user reads and its entities, or Telegram's 400 for bad markup or length."""
    mode = params.get("parse_mode")
    given = json_param(params, "caption_entities" if caption else "entities") or []
    try:
        return render_text(text, mode, given, caption=caption)
    except ValueError as e:
        raise ApiError(400, f"Bad Request: {e}") from None
