"""The chats of the Telegram double: every message by chat, what the bot did, and the files.

One ``TelegramState`` is shared by the method handlers, the update builders and
``FakeTelegram``; callers hold ``state.lock`` (not re-entrant) around anything that reads or
writes it. Message ids count per chat, as on Telegram.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fakes.telegram_files import FileStore
from fakes.telegram_models import ApiCall, CallbackAnswer, ChatAction, SentMessage

__all__ = ["TelegramState"]


def _unknown_chat(chat_id: int | str) -> dict[str, Any]:
    """A chat nobody injected into: private for a positive id, else a group."""
    if isinstance(chat_id, int) and chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": "User"}
    return {"id": chat_id, "type": "supergroup", "title": "Test group"}


class TelegramState:
    """Chats, messages (user and bot alike) and the recordings tests read."""

    def __init__(self, token: Callable[[], str]) -> None:
        self.lock = threading.Lock()
        self.files = FileStore(token)
        self.chats: dict[int | str, dict[str, Any]] = {}
        self.msg_ids: dict[int | str, int] = {}
        self.messages: dict[tuple[int | str, int], dict[str, Any]] = {}
        self.records: dict[tuple[int | str, int], SentMessage] = {}  # the bot's, by message
        self.sent: list[SentMessage] = []
        self.actions: list[ChatAction] = []
        self.reactions: list[tuple[int | str, int, str]] = []  # chat, message, emoji ("": none)
        self.calls: list[ApiCall] = []
        self.commands: list[dict[str, str]] = []
        # setWebhook's url, secret_token and allowed_updates while a webhook is set
        self.webhook: dict[str, Any] | None = None
        self.queries: dict[str, int] = {}  # callback queries not yet answered -> who pressed
        self.callback_answers: list[CallbackAnswer] = []

    def new_message(
        self, chat_id: int | str, thread: int | None, sender: dict[str, Any]
    ) -> dict[str, Any]:
        """A stored message from ``sender`` with the chat's next id (content added later)."""
        self.msg_ids[chat_id] = message_id = self.msg_ids.get(chat_id, 0) + 1
        chat = self.chats.get(chat_id) or _unknown_chat(chat_id)
        msg = {
            "message_id": message_id,
            "from": dict(sender),
            "chat": dict(chat),
            "date": int(time.time()),
        }
        if thread is not None:
            msg.update(message_thread_id=thread, is_topic_message=True)
        self.messages[(chat_id, message_id)] = msg
        return msg
