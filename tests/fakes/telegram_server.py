"""Telegram Bot API server on 127.0.0.1, a test double for Telegram.

The real python-telegram-bot reaches it through ``Bot(token, base_url=fake.api_base,
base_file_url=fake.file_api_base)``, so tests exercise the real wire protocol (form, multipart
and JSON bodies, error bodies, long polling) instead of mocking our own code. It is as strict as
Telegram where adapters usually go wrong (message length, HTML entities, empty text, editing
unchanged text, unknown reply targets) and records what a user would have seen.
It runs in a daemon thread with its own event loop, so sync tests, async tests and benchmarks
can all share it. Lengths are counted in UTF-16 code units, as Telegram counts them.

The parts: ``telegram_models`` (records, errors, parameters), ``telegram_files`` (stored files
and downloads), ``telegram_state`` (chats and messages), ``telegram_methods`` (the Bot API
methods), ``telegram_updates`` (user messages and long polling), ``telegram_faults`` (refused
calls, slow downloads); this module serves them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from fakes.telegram_faults import FailWindow, Faults, InjectFaults
from fakes.telegram_files import Download, generated_bytes
from fakes.telegram_gates import Gate, Gates, InjectGates
from fakes.telegram_methods import Methods
from fakes.telegram_models import (
    BOT_ID,
    BOT_USER,
    BOT_USERNAME,
    ApiCall,
    ApiError,
    CallbackAnswer,
    ChatAction,
    SentMessage,
    Upload,
    buttons,
)
from fakes.telegram_state import TelegramState
from fakes.telegram_updates import InjectUpdates, UpdateQueue

__all__ = [
    "BOT_ID",
    "BOT_USER",
    "BOT_USERNAME",
    "ApiCall",
    "ApiError",
    "CallbackAnswer",
    "ChatAction",
    "Download",
    "FailWindow",
    "FakeTelegram",
    "Gate",
    "SentMessage",
    "Upload",
    "buttons",
    "generated_bytes",
]


class FakeTelegram(InjectUpdates, InjectFaults, InjectGates):
    """The Bot API for one bot (id 999, @pinclaw_test_bot) and its chats.

    ``inject_message``, ``inject_photo``, ``inject_callback_query``... (what users send)
    come from ``InjectUpdates``; ``fail_next``, ``fail_for``, ``slow_downloads``... (what
    goes wrong) from ``InjectFaults``.
    """

    def __init__(self, token: str = "123456:TEST") -> None:
        self.token = token
        self._state = TelegramState(lambda: self.token)
        self._queue = UpdateQueue()
        self._methods = Methods(self._state, self._queue.drop_pending)
        self._faults = Faults()
        self._gates = Gates()  # requests held before or after they are handled
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        """Serve on an ephemeral port in a daemon thread; returns once it is listening."""
        if self._thread is not None:
            return self
        self._queue.open()
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
        app.router.add_get("/file/bot{token}/{path:.+}", self._state.files.serve)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]

    def stop(self) -> None:
        """Answer pending long polls, close the server, end the thread."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        self._queue.close()
        if runner is not None:
            loop.call_soon_threadsafe(self._queue.wake)
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
        with self._state.lock:
            return [dataclasses.replace(r, edits=list(r.edits)) for r in self._state.sent]

    @property
    def chat_actions(self) -> list[ChatAction]:
        with self._state.lock:
            return list(self._state.actions)

    @property
    def reactions(self) -> list[tuple[int | str, int, str]]:
        """setMessageReaction calls in order: chat, message id, the emoji ("": cleared)."""
        with self._state.lock:
            return list(self._state.reactions)

    @property
    def commands(self) -> list[dict[str, str]]:
        with self._state.lock:
            return [dict(c) for c in self._state.commands]

    @property
    def webhook(self) -> dict[str, Any] | None:
        """setWebhook's url, secret_token and allowed_updates; None when none is set."""
        with self._state.lock:
            return dict(self._state.webhook) if self._state.webhook else None

    @property
    def callback_answers(self) -> list[CallbackAnswer]:
        """What users who pressed inline buttons were shown (answerCallbackQuery)."""
        with self._state.lock:
            return list(self._state.callback_answers)

    @property
    def calls(self) -> list[ApiCall]:
        with self._state.lock:
            return list(self._state.calls)

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates not yet confirmed by a getUpdates offset."""
        return self._queue.pending()

    @property
    def polls_begun(self) -> int:
        """getUpdates calls the fake began to serve, a long poll while it still waits (in
        ``calls`` and ``poll_offsets`` only once answered)."""
        return self._queue.polls()

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

    # -- the HTTP side ----------------------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = {}
        try:
            params = await _read_params(request)
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            failure = self._faults.take(method)
            if failure is not None:
                raise failure
            if method.lower() == "getupdates":
                if self.webhook is not None:  # as Telegram refuses it
                    raise ApiError(
                        409,
                        "Conflict: can't use getUpdates method while webhook is active; "
                        "use deleteWebhook to delete the webhook first",
                    )
                result = await self._queue.get_updates(params)
            else:
                handler = self._methods.get(method)
                if handler is None:
                    raise ApiError(404, "Not Found")
                if not await self._gates.before(request, method, params):
                    return web.Response(status=499)  # its client is gone: nothing was done
                with self._state.lock:
                    result = handler(params)
                await self._gates.after(method, params)
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
        with self._state.lock:
            self._state.calls.append(ApiCall(method, params, status, desc))


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
