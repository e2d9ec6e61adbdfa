"""Telegram Bot API server on 127.0.0.1, a test double for Telegram.

The real python-telegram-bot reaches it through ``Bot(token, base_url=fake.api_base,
base_file_url=fake.file_api_base)``, so tests exercise the real wire protocol (form, multipart
and JSON bodies, error bodies, long polling) instead of mocking our own code. It is as strict as
Telegram where adapters usually go wrong (message length, HTML entities, empty text, editing
unchanged text, unknown reply targets) and records what a user would have seen.
It runs in a daemon thread with its own event loop, so sync tests, async tests and benchmarks
can all share it. Lengths are counted in UTF-16 code units, as Telegram counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from fakes.telegram_html import find_entities, render_text

__all__ = ["ApiCall", "ChatAction", "FakeTelegram", "SentMessage", "Upload"]

BOT_ID = 999
BOT_USERNAME = "pinclaw_test_bot"
BOT_USER = {"id": BOT_ID, "is_bot": True, "first_name": "Pinclaw Test", "username": BOT_USERNAME}
CONFLICT = (
    "Conflict: terminated by other getUpdates request;"
    " make sure that only one bot instance is running"
)
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
_NOT_BY_DEFAULT = {"chat_member", "message_reaction", "message_reaction_count"}


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


@dataclass(frozen=True)
class ChatAction:
    """A sendChatAction ("typing" ...)."""

    chat_id: int | str
    action: str
    message_thread_id: int | None = None


@dataclass(frozen=True)
class ApiCall:
    """Every request, accepted or not, with the HTTP status it got."""

    method: str
    params: dict[str, Any]
    status: int
    description: str | None = None


@dataclass
class _File:
    file_id: str
    path: str
    data: bytes
    name: str | None
    mime: str


class ApiError(Exception):
    """An error answer in Telegram's body shape."""

    def __init__(self, status: int, description: str, **parameters: Any) -> None:
        super().__init__(description)
        self.status, self.description, self.parameters = status, description, parameters


def _int(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"Bad Request: invalid {name} specified") from None


def _json(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ApiError(400, f"Bad Request: can't parse {name} JSON object") from None


def _chat_id(params: dict[str, Any]) -> int | str:
    value = params.get("chat_id")
    if value is None or value == "":
        raise ApiError(400, "Bad Request: chat_id is empty")
    if isinstance(value, str) and value.startswith("@"):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, "Bad Request: chat not found") from None


class FakeTelegram:
    """The Bot API for one bot (id 999, @pinclaw_test_bot) and its chats."""

    def __init__(self, token: str = "123456:TEST") -> None:
        self.token = token
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._update_ids = itertools.count(100_001)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._closing = False
        self._wake = asyncio.Event()
        self._poll_gen = 0
        self._allowed: list[str] = []
        self._updates: list[dict[str, Any]] = []
        self._failures: list[tuple[str, ApiError]] = []
        self._chats: dict[int | str, dict[str, Any]] = {}
        self._msg_ids: dict[int | str, int] = {}
        self._messages: dict[tuple[int | str, int], dict[str, Any]] = {}
        self._records: dict[tuple[int | str, int], SentMessage] = {}
        self._files: dict[str, _File] = {}
        self._sent: list[SentMessage] = []
        self._actions: list[ChatAction] = []
        self._calls: list[ApiCall] = []
        self._commands: list[dict[str, str]] = []
        self._handlers = self._method_table()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        """Serve on an ephemeral port in a daemon thread; returns once it is listening."""
        if self._thread is not None:
            return self
        self._closing = False
        self._wake = asyncio.Event()
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._loop = loop
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10) or not self._port:
            raise RuntimeError("fake Telegram server did not start")
        return self

    def _run(self, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._handle_file)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    def stop(self) -> None:
        """Answer pending long polls, close the server, end the thread."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        self._closing = True
        if runner is not None:
            loop.call_soon_threadsafe(self._fire)
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = self._runner = None
        self._port = 0

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def api_base(self) -> str:
        """For ``Bot(base_url=...)``; PTB appends the token."""
        return f"http://127.0.0.1:{self._require_port()}/bot"

    @property
    def file_api_base(self) -> str:
        """For ``Bot(base_file_url=...)``."""
        return f"http://127.0.0.1:{self._require_port()}/file/bot"

    def _require_port(self) -> int:
        if not self._port:
            raise RuntimeError("FakeTelegram is not started")
        return self._port

    # -- what the bot did (snapshots) ---------------------------------------------------------

    @property
    def sent(self) -> list[SentMessage]:
        with self._lock:
            return [dataclasses.replace(r, edits=list(r.edits)) for r in self._sent]

    @property
    def chat_actions(self) -> list[ChatAction]:
        with self._lock:
            return list(self._actions)

    @property
    def commands(self) -> list[dict[str, str]]:
        with self._lock:
            return [dict(c) for c in self._commands]

    @property
    def calls(self) -> list[ApiCall]:
        with self._lock:
            return list(self._calls)

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates not yet confirmed by a getUpdates offset."""
        with self._lock:
            return list(self._updates)

    def wait_for(
        self,
        predicate: Callable[[SentMessage], bool] | None = None,
        *,
        count: int = 1,
        timeout: float = 5.0,
    ) -> list[SentMessage]:
        """Block until ``count`` sent messages match; returns all that match."""
        deadline = time.monotonic() + timeout
        while len(found := self._matching(predicate)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(self._timeout_message(count, timeout))
            time.sleep(0.01)
        return found

    async def await_for(
        self,
        predicate: Callable[[SentMessage], bool] | None = None,
        *,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109 - the same signature as wait_for
    ) -> list[SentMessage]:
        """Like :meth:`wait_for`, without blocking the caller's event loop."""
        deadline = time.monotonic() + timeout
        while len(found := self._matching(predicate)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(self._timeout_message(count, timeout))
            await asyncio.sleep(0.01)
        return found

    def _matching(self, predicate: Callable[[SentMessage], bool] | None) -> list[SentMessage]:
        return [r for r in self.sent if predicate is None or predicate(r)]

    def _timeout_message(self, count: int, timeout: float) -> str:
        sent = [f"{r.method}({r.chat_id}#{r.message_id}): {r.text!r:.80}" for r in self.sent]
        rejected = [
            f"{c.method} -> {c.status} {c.description}" for c in self.calls if c.status >= 300
        ]
        return (
            f"fewer than {count} matching message(s) within {timeout}s;"
            f" sent: {sent or 'nothing'}; rejected calls: {rejected or 'none'}"
        )

    # -- failure injection ----------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int = 1,
        times: int = 1,
        description: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` ("*" for any) with an error."""
        if status == 429:
            error = ApiError(429, description or f"Too Many Requests: retry after {retry_after}")
            error.parameters = {"retry_after": retry_after}
        else:
            phrases = {500: "Internal Server Error", 502: "Bad Gateway", 400: "Bad Request"}
            error = ApiError(status, description or phrases.get(status, "Error"))
        with self._lock:
            self._failures.extend([(method.lower(), error)] * times)

    def _take_failure(self, method: str) -> ApiError | None:
        with self._lock:
            for i, (name, error) in enumerate(self._failures):
                if name in (method.lower(), "*"):
                    del self._failures[i]
                    return error
        return None

    # -- incoming updates -----------------------------------------------------------------------

    def inject_update(self, update: dict[str, Any]) -> int:
        """Queue any raw update (without update_id); returns the update_id."""
        with self._lock:
            update_id = next(self._update_ids)
            self._updates.append({"update_id": update_id, **update})
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._fire)
        return update_id

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
        with self._lock:
            self._chats[chat_id] = chat
            msg = self._new_message(chat_id, message_thread_id, user)
            msg.update(content)
            if reply_to_bot:
                msg["reply_to_message"] = self._bot_message_to_reply(chat_id, message_thread_id)
        self.inject_update({"message": msg})
        return int(msg["message_id"])

    def _stored_media(
        self, kind: str, data: bytes, name: str | None, mime: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        with self._lock:
            return self._media(kind, self._store(kind, data, name, mime), params)

    def _bot_message_to_reply(self, chat_id: int, thread: int | None) -> dict[str, Any]:
        mine = [r for r in self._sent if r.chat_id == chat_id and not r.deleted]
        if mine:
            return dict(self._messages[(chat_id, mine[-1].message_id)])
        msg = self._new_message(chat_id, thread, BOT_USER)
        msg["text"] = "(an earlier message of the bot)"
        return dict(msg)

    def _fire(self) -> None:
        """Wake every waiting long poll (runs on the server loop)."""
        old, self._wake = self._wake, asyncio.Event()
        old.set()

    # -- the HTTP side ----------------------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = {}
        try:
            params = await _read_params(request)
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            failure = self._take_failure(method)
            if failure is not None:
                raise failure
            if method.lower() == "getupdates":
                result = await self._get_updates(params)
            else:
                handler = self._handlers.get(method.lower())
                if handler is None:
                    raise ApiError(404, "Not Found")
                with self._lock:
                    result = handler(params)
        except ApiError as e:
            self._record_call(method, params, e.status, e.description)
            body: dict[str, Any] = {
                "ok": False,
                "error_code": e.status,
                "description": e.description,
            }
            if e.parameters:
                body["parameters"] = e.parameters
            return web.json_response(body, status=e.status)
        self._record_call(method, params, 200, None)
        return web.json_response({"ok": True, "result": result})

    def _record_call(
        self, method: str, params: dict[str, Any], status: int, desc: str | None
    ) -> None:
        with self._lock:
            self._calls.append(ApiCall(method, params, status, desc))

    async def _handle_file(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        with self._lock:
            found = [f for f in self._files.values() if f.path == path]
        if request.match_info["token"] != self.token or not found:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        return web.Response(body=found[0].data, content_type=found[0].mime)

    def _method_table(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        handlers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "getme": lambda _p: dict(BOT_USER, can_join_groups=True),
            "deletewebhook": self._delete_webhook,
            "setmycommands": self._set_commands,
            "getmycommands": lambda _p: [dict(c) for c in self._commands],
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "sendchataction": self._send_chat_action,
            "getfile": self._get_file,
            "deletemessage": self._delete_message,
            "answercallbackquery": _true,
            "close": _true,
            "logout": _true,
        }
        for name in MEDIA:
            handlers[name.lower()] = functools.partial(self._send_media, name)
        return handlers

    # -- methods (called with the lock held, except getUpdates) ----------------------------------

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset, limit = _int(params, "offset"), _int(params, "limit") or 100
        timeout = max(0.0, float(params.get("timeout") or 0))
        allowed = _json(params, "allowed_updates")
        with self._lock:
            if allowed is not None:
                self._allowed = list(allowed)
            if offset is not None and offset < 0:
                del self._updates[: max(0, len(self._updates) + offset)]
            elif offset is not None:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self._poll_gen += 1
            generation = self._poll_gen
        self._fire()  # an older poll still waiting ends with 409 Conflict, as on Telegram
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
        kind = next(k for k in update if k != "update_id")
        return kind in self._allowed if self._allowed else kind not in _NOT_BY_DEFAULT

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self._updates.clear()
        return True

    def _set_commands(self, params: dict[str, Any]) -> bool:
        commands = _json(params, "commands")
        if not isinstance(commands, list):
            raise ApiError(400, 'Bad Request: parameter "commands" is required')
        for c in commands:
            name, desc = str(c.get("command", "")), str(c.get("description", ""))
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name) or not 1 <= len(desc) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self._commands = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, text = _chat_id(params), str(params.get("text") or "")
        plain, entities = _render(params, text, caption=False)
        msg = self._outgoing(chat_id, params)
        msg.update({"text": plain, **({"entities": entities} if entities else {})})
        self._record("sendMessage", msg, params, text=text, plain=plain)
        return msg

    def _send_media(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        kind, _, _, mime = MEDIA[method]
        chat_id, value = _chat_id(params), params.get(kind)
        caption = str(params.get("caption") or "")
        plain, ents = _render(params, caption, caption=True)
        ref, file = None, None
        if isinstance(value, Upload):
            if not value.data:
                raise ApiError(400, "Bad Request: file must be non-empty")
            file = self._store(kind, value.data, value.filename, value.content_type or mime)
        elif isinstance(value, str) and value in self._files:
            ref, file = value, self._files[value]
        elif isinstance(value, str) and re.match(r"https?://", value):
            ref, file = value, self._store(kind, b"", None, mime)
        elif not value:
            raise ApiError(400, f"Bad Request: there is no {kind} in the request")
        else:
            raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
        msg = self._outgoing(chat_id, params)
        msg.update(self._media(kind, file, params))
        if plain:
            msg.update({"caption": plain, **({"caption_entities": ents} if ents else {})})
        data = value.data if isinstance(value, Upload) else None
        name = value.filename if isinstance(value, Upload) else file.name
        fields = {"text": caption or None, "plain": plain or None, "filename": name}
        self._record(method, msg, params, data=data, file_ref=ref, **fields)
        return msg

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id, message_id, text = _chat_id(params), _int(params, "message_id"), params.get("text")
        msg = self._messages.get((chat_id, message_id or 0))
        if msg is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if msg["from"]["id"] != BOT_ID:
            raise ApiError(400, "Bad Request: message can't be edited")
        if "text" not in msg:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        plain, entities = _render(params, str(text or ""), caption=False)
        markup = _json(params, "reply_markup")
        before = (msg["text"], msg.get("entities", []), msg.get("reply_markup"))
        if (plain, entities, markup) == before:
            raise ApiError(400, NOT_MODIFIED)
        for key, value in (("entities", entities), ("reply_markup", markup)):
            msg.pop(key, None)
            if value:
                msg[key] = value
        msg.update(text=plain, edit_date=int(time.time()))
        record = self._records.get((chat_id, msg["message_id"]))
        if record is not None:
            record.edits.append(record.text)
            record.text, record.plain = str(text), plain
            record.parse_mode = params.get("parse_mode")
        return msg

    def _send_chat_action(self, params: dict[str, Any]) -> bool:
        action = str(params.get("action") or "")
        chat_id = _chat_id(params)
        if not ACTIONS.fullmatch(action):
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        self._actions.append(ChatAction(chat_id, action, _int(params, "message_thread_id")))
        return True

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file = self._files.get(str(params.get("file_id") or ""))
        if file is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if len(file.data) > 20 * 1024 * 1024:
            raise ApiError(400, "Bad Request: file is too big")
        return {**_file_json(file), "file_path": file.path}

    def _delete_message(self, params: dict[str, Any]) -> bool:
        key = (_chat_id(params), _int(params, "message_id") or 0)
        if self._messages.pop(key, None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        if key in self._records:
            self._records[key].deleted = True
        return True

    # -- helpers (lock held) ------------------------------------------------------------------

    def _new_message(
        self, chat_id: int | str, thread: int | None, sender: dict[str, Any]
    ) -> dict[str, Any]:
        self._msg_ids[chat_id] = message_id = self._msg_ids.get(chat_id, 0) + 1
        chat = self._chats.get(chat_id) or _unknown_chat(chat_id)
        msg = {
            "message_id": message_id,
            "from": dict(sender),
            "chat": dict(chat),
            "date": int(time.time()),
        }
        if thread is not None:
            msg.update(message_thread_id=thread, is_topic_message=True)
        self._messages[(chat_id, message_id)] = msg
        return msg

    def _outgoing(self, chat_id: int | str, params: dict[str, Any]) -> dict[str, Any]:
        """A new bot message, checking the reply target first as Telegram does."""
        reply = _json(params, "reply_parameters") or {}
        reply_to = reply.get("message_id", _int(params, "reply_to_message_id"))
        target = self._messages.get((chat_id, int(reply_to))) if reply_to is not None else None
        lenient = reply.get("allow_sending_without_reply") or params.get(
            "allow_sending_without_reply"
        )
        if reply_to is not None and target is None and str(lenient).lower() != "true":
            raise ApiError(400, "Bad Request: message to be replied not found")
        msg = self._new_message(chat_id, _int(params, "message_thread_id"), BOT_USER)
        if target is not None:
            msg["reply_to_message"] = {k: v for k, v in target.items() if k != "reply_to_message"}
        markup = _json(params, "reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            msg["reply_markup"] = markup
        return msg

    def _record(
        self, method: str, msg: dict[str, Any], params: dict[str, Any], **fields: Any
    ) -> None:
        reply = msg.get("reply_to_message", {}).get("message_id")
        record = SentMessage(
            method=method,
            chat_id=msg["chat"]["id"],
            message_id=msg["message_id"],
            parse_mode=params.get("parse_mode"),
            reply_to_message_id=reply,
            message_thread_id=msg.get("message_thread_id"),
            reply_markup=_json(params, "reply_markup"),
            params={k: v for k, v in params.items() if not isinstance(v, Upload)},
            **fields,
        )
        self._sent.append(record)
        self._records[(record.chat_id, record.message_id)] = record

    def _store(self, kind: str, data: bytes, name: str | None, mime: str) -> _File:
        folder, ext = next((m[1], m[2]) for m in MEDIA.values() if m[0] == kind)
        n = next(self._ids)
        if name and "." in name:
            ext = name[name.rindex(".") :]
        file = _File(f"file-{kind}-{n}", f"{folder}/file_{n}{ext}", data, name, mime)
        self._files[file.file_id] = file
        return file

    def _media(self, kind: str, file: _File, params: dict[str, Any]) -> dict[str, Any]:
        base = _file_json(file)
        if kind == "photo":
            return {"photo": [{**base, "width": 90, "height": 90}]}
        if kind in ("document", "video", "audio") and file.name:
            base["file_name"] = file.name
        base["mime_type"] = file.mime
        if kind == "video":
            base.update(width=_int(params, "width") or 320, height=_int(params, "height") or 240)
        if kind in ("video", "audio", "voice"):
            base["duration"] = _int(params, "duration") or 1
        return {kind: base}


async def _read_params(request: web.Request) -> dict[str, Any]:
    """Query string, then a JSON, urlencoded or multipart body; resolves attach:// parts."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json" and request.can_read_body:
        try:
            body = await request.json()
        except ValueError:
            raise ApiError(400, "Bad Request: can't parse JSON object") from None
        params.update(body if isinstance(body, dict) else {})
    elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        for key, value in (await request.post()).items():
            if isinstance(value, web.FileField):
                params[key] = Upload(value.filename, value.file.read(), value.content_type)
            else:
                params[key] = value
    for key, value in list(params.items()):
        if isinstance(value, str) and value.startswith("attach://"):
            params[key] = params.get(value.removeprefix("attach://"), value)
    return params


def _true(_params: dict[str, Any]) -> bool:
    return True


def _render(params: dict[str, Any], text: str, *, caption: bool) -> tuple[str, list[Any]]:
    mode = params.get("parse_mode")
    given = _json(params, "caption_entities" if caption else "entities") or []
    try:
        return render_text(text, mode, given, caption=caption)
    except ValueError as e:
        raise ApiError(400, f"Bad Request: {e}") from None


def _file_json(file: _File) -> dict[str, Any]:
    return {
        "file_id": file.file_id,
        "file_unique_id": "u" + file.file_id,
        "file_size": len(file.data),
    }


def _unknown_chat(chat_id: int | str) -> dict[str, Any]:
    if isinstance(chat_id, int) and chat_id > 0:
        return {"id": chat_id, "type": "private", "first_name": "User"}
    return {"id": chat_id, "type": "supergroup", "title": "Test group"}
