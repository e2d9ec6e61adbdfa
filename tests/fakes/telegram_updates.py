"""Updates of the Telegram double: building what users send, and delivering it by getUpdates.

``UpdateQueue`` is the long-polling side (offsets, ``allowed_updates``, 409 Conflict for a
second poller); ``InjectUpdates`` is the part of ``FakeTelegram``'s API that builds user
messages (text, photo, document, voice, audio) the way Telegram shapes them, and raw updates a
client may fail to parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from typing import Any

from fakes.telegram_html import find_entities
from fakes.telegram_models import BOT_USER, ApiError, SentMessage, int_param, json_param
from fakes.telegram_state import TelegramState

__all__ = ["CONFLICT", "InjectUpdates", "UpdateQueue"]

CONFLICT = (
    "Conflict: terminated by other getUpdates request;"
    " make sure that only one bot instance is running"
)
_NOT_BY_DEFAULT = {"chat_member", "message_reaction", "message_reaction_count"}


class UpdateQueue:
    """Updates not yet confirmed by an offset, and the long polls waiting for them.

    ``wake`` and ``get_updates`` run on the server loop; ``push`` and the rest on any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(100_001)
        self._updates: list[dict[str, Any]] = []
        self._allowed: list[str] = []
        self._poll_gen = 0
        self._closing = False
        self._wake = asyncio.Event()

    def open(self) -> None:
        """Before serving: polls wait again (a new event for the new loop)."""
        self._closing = False
        self._wake = asyncio.Event()

    def close(self) -> None:
        """Pending polls answer at once (with what they have) after the next ``wake``."""
        self._closing = True

    def push(self, update: dict[str, Any]) -> int:
        """Queue an update; it gets the next update_id (any it had is replaced)."""
        rest = {k: v for k, v in update.items() if k != "update_id"}
        with self._lock:
            update_id = next(self._ids)
            self._updates.append({"update_id": update_id, **rest})
        return update_id

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._updates)

    def polls(self) -> int:
        """getUpdates calls begun so far (a long poll counts from when it starts waiting)."""
        with self._lock:
            return self._poll_gen

    def drop_pending(self) -> None:
        with self._lock:
            self._updates.clear()

    def wake(self) -> None:
        """Wake every waiting long poll (runs on the server loop)."""
        old, self._wake = self._wake, asyncio.Event()
        old.set()

    async def get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """getUpdates: confirm up to ``offset``, then wait up to ``timeout`` s for updates."""
        offset, limit = int_param(params, "offset"), int_param(params, "limit") or 100
        timeout = max(0.0, float(params.get("timeout") or 0))
        allowed = json_param(params, "allowed_updates")
        with self._lock:
            if allowed is not None:
                self._allowed = list(allowed)
            if offset is not None and offset < 0:
                del self._updates[: max(0, len(self._updates) + offset)]
            elif offset is not None:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self._poll_gen += 1
            generation = self._poll_gen
        self.wake()  # an older poll still waiting ends with 409 Conflict, as on Telegram
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if generation != self._poll_gen and not self._closing:
                raise ApiError(409, CONFLICT)
            with self._lock:
                self._updates = [u for u in self._updates if self._wanted(u)]
                batch = self._updates[: min(max(limit, 1), 100)]
            remaining = deadline - loop.time()
            if batch or remaining <= 0 or self._closing:
                return batch
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)

    def _wanted(self, update: dict[str, Any]) -> bool:
        kind = next((k for k in update if k != "update_id"), "")
        return kind in self._allowed if self._allowed else kind not in _NOT_BY_DEFAULT


class InjectUpdates:
    """Mixin for ``FakeTelegram``: what a user sends, as updates for the bot to poll."""

    _state: TelegramState
    _queue: UpdateQueue
    _loop: asyncio.AbstractEventLoop | None
    _query_ids = itertools.count(1)

    def inject_update(self, update: dict[str, Any]) -> int:
        """Queue any raw update (without update_id); returns the update_id."""
        update_id = self._queue.push(update)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._queue.wake)
        return update_id

    def inject_raw_update(self, update: dict[str, Any]) -> int:
        """Queue ``update`` verbatim, however malformed, with the next update_id (replacing any
        it has); nothing is checked or stored in the chats. Returns the update_id."""
        return self.inject_update(dict(update))

    def inject_unparseable_message(self, chat_id: int, user_id: int, text: str = "?") -> int:
        """A user's text message whose ``date`` is a string, which python-telegram-bot's
        ``Update.de_json`` raises on (TypeError), failing the whole getUpdates batch it is in.
        Its message_id is taken in the chat as usual. Returns the update_id."""
        user = {"id": user_id, "is_bot": False, "first_name": "User"}
        with self._state.lock:
            self._state.chats.setdefault(chat_id, {"id": chat_id, "type": "private"})
            msg = dict(self._state.new_message(chat_id, None, user), text=text)
        return self.inject_raw_update({"message": {**msg, "date": "yesterday"}})

    def inject_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        entities: list[Any] | None = None,
        **opts: Any,
    ) -> int:
        """A user's text message; options: username, first_name, chat_type ("private", "group",
        "supergroup"), chat_title, reply_to_bot, message_thread_id. Returns its message_id."""
        ents = find_entities(text) if entities is None else entities
        return self._inject(chat_id, user_id, {"text": text, "entities": ents}, **opts)

    def inject_photo(
        self, chat_id: int, user_id: int, data: bytes, caption: str | None = None, **opts: Any
    ) -> int:
        content = self._stored_media("photo", data, None, "image/jpeg", {})
        return self._inject(chat_id, user_id, content, caption, **opts)

    def inject_document(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        filename: str = "file.bin",
        caption: str | None = None,
        mime_type: str = "application/octet-stream",
        **opts: Any,
    ) -> int:
        content = self._stored_media("document", data, filename, mime_type, {})
        return self._inject(chat_id, user_id, content, caption, **opts)

    def inject_generated_document(
        self,
        chat_id: int,
        user_id: int,
        size: int,
        filename: str = "big.bin",
        caption: str | None = None,
        mime_type: str = "application/octet-stream",
        **opts: Any,
    ) -> int:
        """A document whose ``file_size`` is ``size`` without holding it: its download streams
        ``generated_bytes(0, size)``. Over 20 MB, getFile refuses it ("file is too big") as
        Telegram does. Returns its message_id."""
        files = self._state.files
        stored = files.store("document", b"", filename, mime_type, size=size)
        content = files.media("document", stored, {})
        return self._inject(chat_id, user_id, content, caption, **opts)

    def file_id_of(self, chat_id: int, message_id: int) -> str:
        """The file_id of the file in a message (the largest size of a photo)."""
        with self._state.lock:
            msg = dict(self._state.messages.get((chat_id, message_id)) or {})
        for kind in ("photo", "document", "video", "audio", "voice"):
            media = msg.get(kind)
            if media:
                return str((media[-1] if isinstance(media, list) else media)["file_id"])
        raise ValueError(f"message {(chat_id, message_id)} has no file")

    def inject_voice(
        self, chat_id: int, user_id: int, data: bytes, duration: int = 1, **opts: Any
    ) -> int:
        content = self._stored_media("voice", data, None, "audio/ogg", {"duration": duration})
        return self._inject(chat_id, user_id, content, opts.pop("caption", None), **opts)

    def inject_audio(
        self,
        chat_id: int,
        user_id: int,
        data: bytes,
        duration: int = 1,
        filename: str = "audio.mp3",
        caption: str | None = None,
        **opts: Any,
    ) -> int:
        content = self._stored_media("audio", data, filename, "audio/mpeg", {"duration": duration})
        return self._inject(chat_id, user_id, content, caption, **opts)

    def _inject(
        self,
        chat_id: int,
        user_id: int,
        content: dict[str, Any],
        caption: str | None = None,
        *,
        username: str | None = None,
        first_name: str = "User",
        chat_type: str = "private",
        chat_title: str | None = None,
        reply_to_bot: bool = False,
        message_thread_id: int | None = None,
    ) -> int:
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        names = {k: v for k, v in user.items() if k in ("first_name", "username")}
        chat = {"id": chat_id, "type": chat_type}
        chat.update(names if chat_type == "private" else {"title": chat_title or "Test group"})
        if message_thread_id is not None:
            chat["is_forum"] = True
        if caption is not None:
            content = {**content, "caption": caption, "caption_entities": find_entities(caption)}
        content = {k: v for k, v in content.items() if v != []}
        with self._state.lock:
            self._state.chats[chat_id] = chat
            msg = self._state.new_message(chat_id, message_thread_id, user)
            msg.update(content)
            if reply_to_bot:
                msg["reply_to_message"] = self._bot_message_to_reply(chat_id, message_thread_id)
        self.inject_update({"message": msg})
        return int(msg["message_id"])

    def inject_callback_query(
        self,
        from_user_id: int,
        message: SentMessage,
        data: str,
        *,
        username: str | None = None,
        first_name: str = "User",
    ) -> str:
        """A user presses the inline button with callback ``data`` under the bot's ``message``:
        a ``callback_query`` update carrying the message as it is now. Only a button the
        message still shows can be pressed (ValueError otherwise). Returns the query id, which
        ``callback_answers`` refers to."""
        user: dict[str, Any] = {"id": from_user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        key = (message.chat_id, message.message_id)
        with self._state.lock:
            current = self._state.messages.get(key)
            if current is None:
                raise ValueError(f"message {key} is not in the chat (deleted or never sent)")
            rows = (current.get("reply_markup") or {}).get("inline_keyboard") or []
            if data not in (button.get("callback_data") for row in rows for button in row):
                raise ValueError(f"message {key} shows no button with callback_data {data!r}")
            query_id = f"cq-{next(self._query_ids)}"
            self._state.queries[query_id] = from_user_id
            query = {
                "id": query_id,
                "from": user,
                "message": dict(current),
                "chat_instance": f"ci-{message.chat_id}",
                "data": data,
            }
        self.inject_update({"callback_query": query})
        return query_id

    def _stored_media(
        self, kind: str, data: bytes, name: str | None, mime: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        files = self._state.files
        return files.media(kind, files.store(kind, data, name, mime), params)

    def _bot_message_to_reply(self, chat_id: int, thread: int | None) -> dict[str, Any]:
        """The bot's latest message in the chat, or an earlier one made up for the reply."""
        state = self._state
        mine = [r for r in state.sent if r.chat_id == chat_id and not r.deleted]
        if mine:
            return dict(state.messages[(chat_id, mine[-1].message_id)])
        msg = state.new_message(chat_id, thread, BOT_USER)
        msg["text"] = "(an earlier message of the bot)"
        return dict(msg)
