"""Discord double on 127.0.0.1: REST API and websocket gateway on one aiohttp port.

The real discord.py client talks to it, so tests cover the real wire format (JSON and
multipart bodies, HTTP errors, gateway sequencing and RESUME) instead of mocking our own code.
It runs in a daemon thread with its own event loop, like ``llm_server.FakeLLM``.

Pointing discord.py 2.7 at it (no per-client option exists)::

    import yarl
    from discord.gateway import DiscordWebSocket
    from discord.http import Route

    Route.BASE = fake.api_base                                  # "http://127.0.0.1:P/api/v10"
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)  # "ws://127.0.0.1:P/gateway"

``point_discord_at(fake)`` does exactly that and restores both on exit. Why these two:

- Every REST call builds ``Route(...)`` whose URL is ``Route.BASE + path``, read when the
  Route is built; ``HTTPClient`` and ``Client`` take no base URL. Interaction callbacks
  (``discord.webhook.async_``) use the same ``Route``, so they follow too. Both are
  class attributes, i.e. process-wide: restore them only after the client is closed.
- ``Client.connect`` never calls ``GET /gateway/bot`` (only ``AutoShardedClient`` does, and
  then uses the returned ``url``); it dials ``DiscordWebSocket.DEFAULT_GATEWAY`` and later
  the ``resume_gateway_url`` from READY (this fake returns its own ``/gateway``). After an
  INVALID_SESSION it goes back to ``DEFAULT_GATEWAY``.
- discord.py replaces the URL's query with ``?v=10&encoding=json&compress=zlib-stream``
  (``zstd-stream`` if zstandard is importable); it parses TEXT frames as plain JSON and only
  decompresses BINARY ones, so this fake answers with uncompressed text frames.

Also worth knowing: ``login()`` calls ``GET /users/@me`` (401 -> ``LoginFailure``) and
``GET /oauth2/applications/@me``; ``on_ready`` fires ``guild_ready_timeout`` (default 2 s)
after the last GUILD_CREATE, so tests pass ``guild_ready_timeout=0.1``; Discord (and this
fake) echo the bot's own messages as MESSAGE_CREATE; guild message content is blanked
unless the MESSAGE_CONTENT intent was identified or the bot is mentioned; discord.py parses a
body as JSON only if ``Content-Type`` is exactly ``application/json``; it retries 5xx for
~25 s, so a bug inside this fake answers 418 instead; a non-initial IDENTIFY (after
INVALID_SESSION) first sleeps 5 s in ``Client.before_identify_hook``, a RESUME does not.

The parts: ``discord_models`` (records, errors), ``discord_cdn`` (uploads and downloads),
``discord_state`` (the world), ``discord_messages`` and ``discord_interactions`` (REST routes),
``discord_gateway`` (the websocket); this module wires them into one server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from aiohttp import web
from fakes.discord_delivery import SendFailures, SendGate, Stage
from fakes.discord_gateway import (
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILDS,
    Gateway,
    user_payload,
)
from fakes.discord_interactions import InteractionRoutes
from fakes.discord_messages import MessageRoutes
from fakes.discord_models import (
    ApiError,
    Call,
    ChannelSpec,
    Handler,
    Route,
    SentMessage,
    json_response,
)
from fakes.discord_state import World

__all__ = ["Call", "FakeDiscord", "SendGate", "SentMessage", "point_discord_at"]

T = TypeVar("T")
_log = logging.getLogger(__name__)
_API = re.compile(r"^/api/v\d+")
_API_ROUTE = "/api/v{version:\\d+}"


@contextlib.contextmanager
def point_discord_at(fake: FakeDiscord) -> Iterator[None]:
    """Aim discord.py's REST root and gateway at ``fake``; restore the previous values on exit.

    Process-wide (class attributes): exit only after every client using it is closed.
    """
    import yarl
    from discord.gateway import DiscordWebSocket
    from discord.http import Route as DiscordRoute

    old_base, old_gateway = DiscordRoute.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    DiscordRoute.BASE = fake.api_base
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        DiscordRoute.BASE = old_base
        DiscordWebSocket.DEFAULT_GATEWAY = old_gateway


class FakeDiscord:
    """Scriptable Discord: configure guilds, inject user messages, inspect what the bot did.

    Control methods are thread-safe and may be called from sync or async tests; in async
    tests wait with ``await fake.await_for(...)`` (``wait_for`` would block the client).
    """

    def __init__(
        self,
        *,
        token: str = "TEST.TOKEN",
        upload_limit: int = 10 * 1024 * 1024,
        heartbeat_interval_ms: int = 41_250,
        bot_id: str = "1000",
        bot_name: str = "pinclaw-bot",
    ) -> None:
        self.token = token
        self.port = 0
        self._failures = SendFailures()  # fail_next's errors
        self._world = World(
            bot_id=bot_id,
            bot_name=bot_name,
            upload_limit=upload_limit,
            origin=lambda: f"http://127.0.0.1:{self.port}",
        )
        self.bot_id = bot_id
        self.bot_user = self._world.bot_user
        self._gateway = Gateway(
            token=token,
            heartbeat_interval_ms=heartbeat_interval_ms,
            resume_url=lambda: self.gateway_url,
            ready_data=self._world.ready_data,
            guilds=self._world.guild_payloads,
        )
        self._interactions = InteractionRoutes(self._world, self._gateway)
        self._routes: list[Route] = [
            *MessageRoutes(self._world, self._gateway).routes(_API_ROUTE),
            *self._interactions.routes(_API_ROUTE),
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def upload_limit(self) -> int:
        """Largest file accepted (413 above it), also sent to the bot in interactions."""
        return self._world.upload_limit

    @upload_limit.setter
    def upload_limit(self, value: int) -> None:
        self._world.upload_limit = value

    # ---- lifecycle ----

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def start(self) -> FakeDiscord:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # surfaced to the caller of start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="FakeDiscord", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._gateway.close_all(), loop).result(5)
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> FakeDiscord:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- world setup and injection (any thread) ----

    def add_guild(
        self, guild_id: str | int, name: str = "guild", channels: Iterable[ChannelSpec] = ()
    ) -> None:
        """Add a guild the bot is in. ``channels``: text channel ids, or dicts with ``id``,
        ``name``, ``type`` ("text" | "thread") and ``parent_id`` (threads; default: the first
        text channel). Sent in READY/GUILD_CREATE, or live if a client is connected."""
        with self._world.lock:
            payload = self._world.add_guild(str(guild_id), name, channels)
        if self._gateway.has_session:
            self._run(self._gateway.dispatch("GUILD_CREATE", payload, required=False))

    def dm_channel_id(self, user_id: str | int) -> str:
        """The DM channel between the bot and ``user_id`` (created on first use)."""
        with self._world.lock:
            return self._world.dm_channel(str(user_id), None)

    def inject_dm(
        self,
        user_id: str | int,
        content: str,
        *,
        username: str = "alice",
        bot: bool = False,
        attachments: Sequence[tuple[str, bytes]] | None = None,
        reply_to_message_id: str | int | None = None,
    ) -> str:
        """A user DMs the bot: MESSAGE_CREATE in their DM channel. Returns the message id."""
        uid, world = str(user_id), self._world
        with world.lock:
            cid = world.dm_channel(uid, username, bot=bot)
            msg = world.user_message(cid, None, uid, content, attachments, reply_to_message_id)
        self._run(self._gateway.dispatch("MESSAGE_CREATE", msg, intent=INTENT_DIRECT_MESSAGES))
        return str(msg["id"])

    def inject_guild_message(
        self,
        guild_id: str | int,
        channel_id: str | int,
        user_id: str | int,
        content: str,
        *,
        username: str = "alice",
        bot: bool = False,
        mention_bot: bool = False,
        reply_to_message_id: str | int | None = None,
        attachments: Sequence[tuple[str, bytes]] | None = None,
        thread: bool = False,
    ) -> str:
        """A user posts in a guild channel (or thread; an unknown thread id is created under
        the guild's first text channel, with THREAD_CREATE first). ``mention_bot`` prefixes
        ``<@bot>``; replying to a message pings its author, as Discord's default does."""
        gid, cid, uid, world = str(guild_id), str(channel_id), str(user_id), self._world
        with world.lock:
            new_thread = world.guild_channel(gid, cid, uid, thread)
            world.users.setdefault(uid, user_payload(uid, username, bot=bot))
            if mention_bot and f"<@{self.bot_id}>" not in content:
                content = f"<@{self.bot_id}> {content}"
            msg = world.user_message(cid, gid, uid, content, attachments, reply_to_message_id)
        if new_thread is not None:
            created = {**new_thread, "newly_created": True}
            self._run(self._gateway.dispatch("THREAD_CREATE", created, intent=INTENT_GUILDS))
        gated = not any(m["id"] == self.bot_id for m in msg["mentions"])
        self._run(
            self._gateway.dispatch(
                "MESSAGE_CREATE", msg, intent=INTENT_GUILD_MESSAGES, content_gated=gated
            )
        )
        return str(msg["id"])

    def inject_slash_command(
        self,
        user_id: str | int,
        name: str,
        *,
        guild_id: str | int | None = None,
        channel_id: str | int | None = None,
        username: str = "alice",
    ) -> str:
        """A user runs the application command ``/name`` (no options): INTERACTION_CREATE in
        their DM, or in ``channel_id`` of ``guild_id``. Returns the interaction id. The answer
        is in ``interaction_responses`` (the callback) and, once it has text (a type 4
        callback, an edit of ``@original`` or a followup), in ``messages`` with
        ``reply_to=None``."""
        gid = None if guild_id is None else str(guild_id)
        cid = None if channel_id is None else str(channel_id)
        with self._world.lock:
            payload = self._interactions.invoke(str(user_id), name, gid, cid, username)
        self._run(self._gateway.dispatch("INTERACTION_CREATE", payload))
        return str(payload["id"])

    def inject_button_press(
        self,
        user_id: str | int,
        message_id: str | int,
        custom_id: str,
        *,
        username: str = "alice",
    ) -> str:
        """A user presses the button ``custom_id`` under the bot's message: INTERACTION_CREATE
        (type 3, component_type 2) with the message as it is now. Only a button the message
        still shows can be pressed (ValueError otherwise). Returns the interaction id; the
        bot's response is in ``interaction_responses`` (type 7 edits the message in
        ``messages``; type 4 with flags 64 is seen by the presser alone)."""
        with self._world.lock:
            payload = self._interactions.press(str(user_id), str(message_id), custom_id, username)
        self._run(self._gateway.dispatch("INTERACTION_CREATE", payload))
        return str(payload["id"])

    def gate(
        self, seconds: float, *, stage: Stage = "after", text: str | None = None, times: int = 1
    ) -> SendGate:
        """Hold the next ``times`` message sends (whose content holds ``text``) for
        ``seconds``, ``before`` Discord handles them or ``after`` (fakes/discord_delivery.py)."""
        return self._world.gates.add(SendGate(stage, seconds, text, times))

    def fail_next(self, status: int, message: str, code: int = 0, **more: Any) -> None:
        """Answer the next message sends with this error (fakes/discord_delivery.py's
        ``SendFailures.add``: ``times``, ``headers``, ``retry_after``)."""
        self._failures.add(status, message, code, **more)

    @property
    def deduplicated(self) -> int:
        """Sends that Discord answered with the message their nonce had already created."""
        with self._world.lock:
            return self._world.nonces.deduplicated

    def drop_connection(self, code: int = 4000) -> bool:
        """Close the gateway socket like a network blip; discord.py reconnects and RESUMEs.
        Events injected meanwhile are buffered and replayed. False if nothing was open."""
        return self._run(self._gateway.drop(code))

    # ---- recordings (thread-safe snapshots) ----

    @property
    def messages(self) -> list[SentMessage]:
        with self._world.lock:
            return list(self._world.sent)

    @property
    def reactions(self) -> list[tuple[str, str, str]]:  # (message id, "+" or "-", emoji)
        with self._world.lock:
            return list(self._world.reactions)

    @property
    def typing(self) -> list[str]:
        with self._world.lock:
            return list(self._world.typing)

    @property
    def commands(self) -> dict[str, list[dict[str, Any]]]:
        """Registered application commands: key "global" or a guild id."""
        with self._world.lock:
            return copy.deepcopy(self._world.commands)

    @property
    def interaction_responses(self) -> list[dict[str, Any]]:
        with self._world.lock:
            return copy.deepcopy(self._world.interactions)

    @property
    def calls(self) -> list[Call]:
        with self._world.lock:
            return list(self._world.calls)

    @property
    def identify_count(self) -> int:
        return len(self._gateway.identifies)

    @property
    def last_identify(self) -> dict[str, Any] | None:
        """The last IDENTIFY ``d`` (without token): intents, properties, compress..."""
        ids = self._gateway.identifies
        return copy.deepcopy(ids[-1]) if ids else None

    @property
    def resume_count(self) -> int:
        return self._gateway.resumes

    @property
    def gateway_connections(self) -> list[dict[str, str]]:
        """The query string of every gateway connection (v, encoding, compress)."""
        return list(self._gateway.connections)

    @property
    def connected(self) -> bool:
        return self._gateway.connected

    def reset(self) -> None:
        """Forget recordings (not guilds or sessions), so one server can serve many tests."""
        with self._world.lock:
            self._world.reset_recordings()

    def wait_for(self, predicate: Callable[[], T], timeout: float = 5.0) -> T:
        """Poll ``predicate`` until truthy and return its value; TimeoutError says what the
        fake saw. Blocks the thread: in async tests use ``await_for``."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(self._timeout_message(predicate, timeout))
            time.sleep(0.01)

    async def await_for(self, predicate: Callable[[], T], timeout: float = 5.0) -> T:  # noqa: ASYNC109
        """``wait_for`` that yields to the event loop, so the client keeps running."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(self._timeout_message(predicate, timeout))
            await asyncio.sleep(0.01)

    def _timeout_message(self, predicate: Callable[[], Any], timeout: float) -> str:
        code = getattr(predicate, "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}" if code else repr(predicate)
        sent = [(m.channel_id, m.content[:60]) for m in self.messages[-5:]]
        calls = [f"{c.method} {c.path} {c.status}" for c in self.calls[-8:]]
        return (
            f"condition at {where} still false after {timeout}s; gateway connected="
            f"{self.connected} identifies={self.identify_count} resumes={self.resume_count}; "
            f"last sent={sent}; last calls={calls}"
        )

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("FakeDiscord is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # ---- server side (server thread) ----

    async def _serve(self) -> None:
        app = web.Application(
            client_max_size=max(64 * 1024**2, 4 * self.upload_limit),
            middlewares=[self._middleware],
        )
        routes: list[Route] = [
            ("GET", "/gateway", self._gateway.handle),
            ("GET", self._world.attachments.ROUTE, self._world.attachments.serve),
            ("GET", _API_ROUTE + "/gateway", self._get_gateway),
            ("GET", _API_ROUTE + "/gateway/bot", self._get_gateway),
            *self._routes,
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Auth like Discord (``Bot <token>``), JSON error bodies, and the call log."""
        path = request.path
        rel = _API.sub("", path)
        public = rel == path or rel.startswith(("/gateway", "/interactions/", "/webhooks/"))
        resp: web.StreamResponse
        try:
            if not public and request.headers.get("Authorization") != f"Bot {self.token}":
                raise ApiError(401, "401: Unauthorized", 0)
            resp = self._failures.answer(request) or await handler(request)
        except ApiError as err:
            body: dict[str, Any] = {"message": err.message, "code": err.code}
            if err.errors:
                body["errors"] = err.errors
            resp = json_response(body, status=err.status)
        except web.HTTPException as exc:  # unknown route (404), wrong method (405)...
            body = {"message": f"{exc.status}: {exc.reason}", "code": 0}
            resp = json_response(body, status=exc.status)
        except Exception as exc:  # a fake bug: a 5xx would make discord.py retry for ~25 s
            _log.exception("FakeDiscord failed on %s %s", request.method, path)
            body = {"message": f"FakeDiscord bug: {exc!r}", "code": 0}
            resp = json_response(body, status=418)
        with self._world.lock:
            self._world.calls.append(Call(request.method, rel, resp.status))
        return resp

    async def _get_gateway(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {"url": self.gateway_url}
        if request.path.endswith("/bot"):
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            body.update(shards=1, session_start_limit=limit)
        return json_response(body)
