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
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import mimetypes
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import quote

from aiohttp import BodyPartReader, web

from .discord_gateway import (
    EVERYONE_PERMISSIONS,
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILDS,
    Gateway,
    Snowflakes,
    application_payload,
    dm_channel_payload,
    guild_payload,
    iso,
    member_payload,
    message_payload,
    ready_payload,
    text_channel_payload,
    thread_payload,
    user_payload,
)

__all__ = ["Call", "FakeDiscord", "SentMessage", "point_discord_at"]

T = TypeVar("T")
_log = logging.getLogger(__name__)
MAX_CONTENT = 2000
_API = re.compile(r"^/api/v\d+")
_MENTION = re.compile(r"<@!?(\d+)>")
ChannelSpec = str | int | Mapping[str, Any]


@dataclass(frozen=True)
class SentMessage:
    """A message the bot sent over REST, as the fake holds it now (after edits)."""

    message_id: str
    channel_id: str
    content: str
    reply_to: str | None  # message_reference.message_id
    attachments: tuple[tuple[str, bytes], ...] = ()
    edits: int = 0
    deleted: bool = False
    payload: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Call:
    """One HTTP request; ``path`` is relative to ``api_base`` for REST calls."""

    method: str
    path: str
    status: int


class _ApiError(Exception):
    """Raised by handlers; rendered as Discord's JSON error body by the middleware."""

    def __init__(
        self, status: int, message: str, code: int, errors: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.errors = status, message, code, errors


def _json(body: Any, status: int = 200) -> web.Response:
    """Exactly ``Content-Type: application/json``: discord.py compares the header verbatim
    and treats anything else (aiohttp's ``; charset=utf-8`` included) as text."""
    return web.Response(
        body=json.dumps(body).encode(), status=status, content_type="application/json"
    )


def _form_error(fld: str, code: str, message: str) -> _ApiError:
    errors = {fld: {"_errors": [{"code": code, "message": message}]}}
    return _ApiError(400, "Invalid Form Body", 50035, errors)


@contextlib.contextmanager
def point_discord_at(fake: FakeDiscord) -> Iterator[None]:
    """Aim discord.py's REST root and gateway at ``fake``; restore the previous values on exit.

    Process-wide (class attributes): exit only after every client using it is closed.
    """
    import yarl
    from discord.gateway import DiscordWebSocket
    from discord.http import Route

    old_base, old_gateway = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    Route.BASE = fake.api_base
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        Route.BASE = old_base
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
        self.upload_limit = upload_limit
        self.bot_id = bot_id
        self.bot_user = user_payload(bot_id, bot_name, bot=True)
        self.port = 0
        self._ids = Snowflakes()
        self._lock = threading.RLock()
        self._guilds: dict[str, dict[str, Any]] = {}  # id -> {"name", "joined_at"}
        self._channels: dict[str, dict[str, Any]] = {}  # every channel payload by id
        self._dm_by_user: dict[str, str] = {}
        self._users: dict[str, dict[str, Any]] = {bot_id: self.bot_user}
        self._messages: dict[str, dict[str, Any]] = {}  # every message payload by id
        self._files: dict[str, tuple[str, bytes, str]] = {}  # attachment id -> file
        self._sent: list[SentMessage] = []
        self._typing: list[str] = []
        self._commands: dict[str, list[dict[str, Any]]] = {}
        self._interactions: list[dict[str, Any]] = []
        self._invoked: dict[str, dict[str, Any]] = {}  # interaction token -> where, original
        self._calls: list[Call] = []
        self._gateway = Gateway(
            token=token,
            heartbeat_interval_ms=heartbeat_interval_ms,
            resume_url=lambda: self.gateway_url,
            ready_data=self._ready_data,
            guilds=self._guild_payloads,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

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
        gid = str(guild_id)
        with self._lock:
            self._guilds[gid] = {"name": name, "joined_at": iso()}
            first_text: str | None = None
            for position, spec in enumerate(channels):
                info = dict(spec) if isinstance(spec, Mapping) else {"id": spec}
                cid = str(info["id"])
                kind = info.get("type", "text")
                cname = str(info.get("name", f"channel-{cid}"))
                if kind in ("thread", 11):
                    parent = str(info.get("parent_id") or first_text or "")
                    if not parent:
                        raise ValueError(f"thread {cid} needs a parent_id")
                    self._channels[cid] = thread_payload(cid, gid, parent, cname, self.bot_id)
                else:
                    first_text = first_text or cid
                    self._channels[cid] = text_channel_payload(cid, gid, cname, position)
            payload = self._guild_payload(gid)
        if self._gateway.has_session:
            self._run(self._gateway.dispatch("GUILD_CREATE", payload, required=False))

    def dm_channel_id(self, user_id: str | int) -> str:
        """The DM channel between the bot and ``user_id`` (created on first use)."""
        with self._lock:
            return self._dm_channel(str(user_id), None)

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
        uid = str(user_id)
        with self._lock:
            cid = self._dm_channel(uid, username, bot=bot)
            msg = self._user_message(cid, None, uid, content, attachments, reply_to_message_id)
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
        gid, cid, uid = str(guild_id), str(channel_id), str(user_id)
        new_thread: dict[str, Any] | None = None
        with self._lock:
            if gid not in self._guilds:
                raise ValueError(f"unknown guild {gid}: call add_guild first")
            channel = self._channels.get(cid)
            if channel is None and thread:
                parent = next(
                    (
                        c["id"]
                        for c in self._channels.values()
                        if c.get("guild_id") == gid and c["type"] == 0
                    ),
                    None,
                )
                if parent is None:
                    raise ValueError(f"guild {gid} has no text channel to hold thread {cid}")
                new_thread = thread_payload(cid, gid, parent, f"thread-{cid}", uid)
                channel = self._channels[cid] = new_thread
            if channel is None or channel.get("guild_id") != gid:
                raise ValueError(f"unknown channel {cid} in guild {gid}: list it in add_guild")
            if thread != (channel["type"] == 11):
                raise ValueError(f"channel {cid} is {'not ' if thread else ''}a thread")
            self._users.setdefault(uid, user_payload(uid, username, bot=bot))
            if mention_bot and f"<@{self.bot_id}>" not in content:
                content = f"<@{self.bot_id}> {content}"
            msg = self._user_message(cid, gid, uid, content, attachments, reply_to_message_id)
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
        uid = str(user_id)
        with self._lock:
            if guild_id is None:
                cid, gid = self._dm_channel(uid, username), None
            else:
                gid, cid = str(guild_id), str(channel_id)
                if self._channels.get(cid, {}).get("guild_id") != gid:
                    raise ValueError(f"unknown channel {cid} in guild {gid}: list it in add_guild")
            user = self._users.setdefault(uid, user_payload(uid, username))
            iid, token = self._ids.next(), f"itoken-{self._ids.next()}"
            self._invoked[token] = {"channel_id": cid, "guild_id": gid, "original": None}
            payload: dict[str, Any] = {
                "id": iid,
                "application_id": self.bot_id,
                "type": 2,
                "token": token,
                "version": 1,
                "data": {"id": self._ids.next(), "name": name, "type": 1},
                "channel_id": cid,
                "channel": copy.deepcopy(self._channels[cid]),
                "locale": "en-US",
                "app_permissions": EVERYONE_PERMISSIONS,
                "attachment_size_limit": self.upload_limit,
                "entitlements": [],
                "authorizing_integration_owners": {"0" if gid else "1": gid or uid},
                "context": 0 if gid else 1,
            }
            if gid:
                member = member_payload(self._guilds[gid]["joined_at"])
                payload.update(
                    guild_id=gid,
                    guild_locale="en-US",
                    member={**member, "user": user, "permissions": EVERYONE_PERMISSIONS},
                )
            else:
                payload["user"] = user
        self._run(self._gateway.dispatch("INTERACTION_CREATE", payload))
        return iid

    def drop_connection(self, code: int = 4000) -> bool:
        """Close the gateway socket like a network blip; discord.py reconnects and RESUMEs.
        Events injected meanwhile are buffered and replayed. False if nothing was open."""
        return self._run(self._gateway.drop(code))

    # ---- recordings (thread-safe snapshots) ----

    @property
    def messages(self) -> list[SentMessage]:
        with self._lock:
            return list(self._sent)

    @property
    def typing(self) -> list[str]:
        with self._lock:
            return list(self._typing)

    @property
    def commands(self) -> dict[str, list[dict[str, Any]]]:
        """Registered application commands: key "global" or a guild id."""
        with self._lock:
            return copy.deepcopy(self._commands)

    @property
    def interaction_responses(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._interactions)

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

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
        with self._lock:
            self._sent.clear()
            self._typing.clear()
            self._commands.clear()
            self._interactions.clear()
            self._calls.clear()

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

    # ---- helpers (callers hold self._lock) ----

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("FakeDiscord is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def _dm_channel(self, uid: str, username: str | None, *, bot: bool = False) -> str:
        user = self._users.get(uid)
        if user is None:
            user = self._users[uid] = user_payload(uid, username or f"user{uid}", bot=bot)
        cid = self._dm_by_user.get(uid)
        if cid is None:
            cid = self._dm_by_user[uid] = self._ids.next()
            self._channels[cid] = dm_channel_payload(cid, user)
        return cid

    def _store_file(
        self, cid: str, filename: str, data: bytes, ctype: str | None
    ) -> dict[str, Any]:
        aid = self._ids.next()
        ctype = ctype or mimetypes.guess_type(filename)[0] or "application/octet-stream"
        self._files[aid] = (filename, data, ctype)
        url = f"http://127.0.0.1:{self.port}/attachments/{cid}/{aid}/{quote(filename)}"
        return {
            "id": aid,
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": ctype,
        }

    def _mentions(self, content: str, guild_id: str | None) -> list[dict[str, Any]]:
        found = []
        for uid in dict.fromkeys(_MENTION.findall(content)):
            user = self._users.get(uid)
            if user is not None:
                found.append({**user, "member": member_payload(iso())} if guild_id else user)
        return found

    def _reference(
        self, cid: str, gid: str | None, ref_id: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        ref: dict[str, Any] = {"type": 0, "message_id": ref_id, "channel_id": cid}
        if gid:
            ref["guild_id"] = gid
        target = self._messages.get(ref_id)
        if target is not None:
            target = {k: v for k, v in target.items() if k != "referenced_message"}
        return ref, target

    def _base_message(
        self, cid: str, gid: str | None, author: dict[str, Any], content: str
    ) -> dict[str, Any]:
        joined = self._guilds[gid]["joined_at"] if gid else None
        mentions = self._mentions(content, gid)
        return message_payload(self._ids.next(), cid, gid, author, content, mentions, joined)

    def _user_message(
        self,
        cid: str,
        gid: str | None,
        uid: str,
        content: str,
        attachments: Sequence[tuple[str, bytes]] | None,
        reply_to: str | int | None,
    ) -> dict[str, Any]:
        msg = self._base_message(cid, gid, self._users[uid], content)
        msg["attachments"] = [self._store_file(cid, n, b, None) for n, b in attachments or ()]
        if reply_to is not None:
            ref, target = self._reference(cid, gid, str(reply_to))
            msg["type"], msg["message_reference"] = 19, ref
            if target is not None:
                msg["referenced_message"] = target
                replied = target["author"]
                if all(m["id"] != replied["id"] for m in msg["mentions"]):
                    extra = {**replied, "member": member_payload(iso())} if gid else replied
                    msg["mentions"].append(extra)
        self._messages[msg["id"]] = msg
        return msg

    def _ready_data(self) -> dict[str, Any]:
        with self._lock:
            return ready_payload(self.bot_user, list(self._guilds))

    def _guild_payloads(self) -> list[dict[str, Any]]:
        with self._lock:
            return [self._guild_payload(gid) for gid in self._guilds]

    def _guild_payload(self, gid: str) -> dict[str, Any]:
        info = self._guilds[gid]
        mine = [c for c in self._channels.values() if c.get("guild_id") == gid]
        return guild_payload(gid, info["name"], info["joined_at"], mine, self.bot_user)

    # ---- server side (server thread) ----

    async def _serve(self) -> None:
        app = web.Application(
            client_max_size=max(64 * 1024**2, 4 * self.upload_limit),
            middlewares=[self._middleware],
        )
        api = "/api/v{version:\\d+}"
        routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
            ("GET", "/gateway", self._gateway.handle),
            ("GET", "/attachments/{channel_id}/{attachment_id}/{filename}", self._attachment),
            ("GET", api + "/gateway", self._get_gateway),
            ("GET", api + "/gateway/bot", self._get_gateway),
            ("GET", api + "/users/@me", self._me),
            ("POST", api + "/users/@me/channels", self._create_dm),
            ("GET", api + "/users/{user_id}", self._get_user),
            ("GET", api + "/oauth2/applications/@me", self._application),
            ("GET", api + "/applications/@me", self._application),
            ("GET", api + "/applications/{app_id}/commands", self._get_commands),
            ("PUT", api + "/applications/{app_id}/commands", self._put_commands),
            ("POST", api + "/applications/{app_id}/commands", self._post_command),
            ("GET", api + "/applications/{app_id}/guilds/{guild_id}/commands", self._get_commands),
            ("PUT", api + "/applications/{app_id}/guilds/{guild_id}/commands", self._put_commands),
            ("POST", api + "/applications/{app_id}/guilds/{guild_id}/commands", self._post_command),
            ("GET", api + "/channels/{channel_id}", self._get_channel),
            ("POST", api + "/channels/{channel_id}/typing", self._typing_post),
            ("POST", api + "/channels/{channel_id}/messages", self._send_message),
            ("GET", api + "/channels/{channel_id}/messages/{message_id}", self._get_message),
            ("PATCH", api + "/channels/{channel_id}/messages/{message_id}", self._edit_message),
            ("DELETE", api + "/channels/{channel_id}/messages/{message_id}", self._delete),
            (
                "PUT",
                api + "/channels/{channel_id}/messages/{message_id}/reactions/{tail:.+}",
                self._no_content,
            ),
            (
                "DELETE",
                api + "/channels/{channel_id}/messages/{message_id}/reactions/{tail:.+}",
                self._no_content,
            ),
            ("POST", api + "/interactions/{interaction_id}/{token}/callback", self._callback),
            ("POST", api + "/webhooks/{app_id}/{token}", self._followup),
            ("GET", api + "/webhooks/{app_id}/{token}/messages/{message_id}", self._hook_get),
            ("PATCH", api + "/webhooks/{app_id}/{token}/messages/{message_id}", self._hook_edit),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    @web.middleware
    async def _middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        """Auth like Discord (``Bot <token>``), JSON error bodies, and the call log."""
        path = request.path
        rel = _API.sub("", path)
        public = rel == path or rel.startswith(("/gateway", "/interactions/", "/webhooks/"))
        resp: web.StreamResponse
        try:
            if not public and request.headers.get("Authorization") != f"Bot {self.token}":
                raise _ApiError(401, "401: Unauthorized", 0)
            resp = await handler(request)
        except _ApiError as err:
            body: dict[str, Any] = {"message": err.message, "code": err.code}
            if err.errors:
                body["errors"] = err.errors
            resp = _json(body, status=err.status)
        except web.HTTPException as exc:  # unknown route (404), wrong method (405)...
            resp = _json({"message": f"{exc.status}: {exc.reason}", "code": 0}, status=exc.status)
        except Exception as exc:  # a fake bug: a 5xx would make discord.py retry for ~25 s
            _log.exception("FakeDiscord failed on %s %s", request.method, path)
            body = {"message": f"FakeDiscord bug: {exc!r}", "code": 0}
            resp = _json(body, status=418)
        with self._lock:
            self._calls.append(Call(request.method, rel, resp.status))
        return resp

    async def _no_content(self, _: web.Request) -> web.Response:
        return web.Response(status=204)

    async def _get_gateway(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {"url": self.gateway_url}
        if request.path.endswith("/bot"):
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            body.update(shards=1, session_start_limit=limit)
        return _json(body)

    async def _me(self, _: web.Request) -> web.Response:
        return _json({**self.bot_user, "verified": True, "mfa_enabled": False})

    async def _get_user(self, request: web.Request) -> web.Response:
        with self._lock:
            user = self._users.get(request.match_info["user_id"])
        if user is None:
            raise _ApiError(404, "Unknown User", 10013)
        return _json(user)

    async def _application(self, _: web.Request) -> web.Response:
        return _json(application_payload(self.bot_user))

    async def _create_dm(self, request: web.Request) -> web.Response:
        uid = str((await request.json()).get("recipient_id"))
        with self._lock:
            cid = self._dm_channel(uid, None)
            return _json(self._channels[cid])

    def _channel(self, request: web.Request) -> dict[str, Any]:
        channel = self._channels.get(request.match_info["channel_id"])
        if channel is None:
            raise _ApiError(404, "Unknown Channel", 10003)
        return channel

    async def _get_channel(self, request: web.Request) -> web.Response:
        with self._lock:
            return _json(self._channel(request))

    async def _typing_post(self, request: web.Request) -> web.Response:
        with self._lock:
            self._typing.append(self._channel(request)["id"])
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.Response:
        with self._lock:
            found = self._files.get(request.match_info["attachment_id"])
        if found is None:
            return web.Response(status=404, text="asset not found")
        return web.Response(body=found[1], content_type=found[2])

    # -- commands --

    def _command_key(self, request: web.Request) -> str:
        return request.match_info.get("guild_id", "global")

    def _command(self, key: str, data: dict[str, Any], old: list[dict[str, Any]]) -> dict[str, Any]:
        """Fill in what Discord adds; a name already registered keeps its id, like Discord."""
        same = next((c for c in old if c["name"] == data.get("name")), None)
        cmd = {
            "type": 1,
            "description": "",
            "options": [],
            "default_member_permissions": None,
            "dm_permission": True,
            "nsfw": False,
            **data,
            "id": same["id"] if same else self._ids.next(),
            "application_id": self.bot_id,
            "version": self._ids.next(),
        }
        if key != "global":
            cmd["guild_id"] = key
        return cmd

    async def _get_commands(self, request: web.Request) -> web.Response:
        with self._lock:
            return _json(self._commands.get(self._command_key(request), []))

    async def _put_commands(self, request: web.Request) -> web.Response:
        key, body = self._command_key(request), await request.json()
        with self._lock:
            old = self._commands.get(key, [])
            self._commands[key] = [self._command(key, c, old) for c in body]
            return _json(self._commands[key])

    async def _post_command(self, request: web.Request) -> web.Response:
        key, body = self._command_key(request), await request.json()
        with self._lock:
            old = self._commands.setdefault(key, [])
            cmd = self._command(key, body, old)
            existed = any(c["id"] == cmd["id"] for c in old)
            old[:] = [c for c in old if c["id"] != cmd["id"]] + [cmd]
        return _json(cmd, status=200 if existed else 201)

    async def _callback(self, request: web.Request) -> web.Response:
        body, files = await self._read_body(request)
        kind = int(body.get("type", 0))
        data = body.get("data") or {}
        with self._lock:
            self._interactions.append(
                {
                    "interaction_id": request.match_info["interaction_id"],
                    "token": request.match_info["token"],
                    "type": kind,
                    "data": data,
                    "files": [(n, b) for n, b, _ in files],
                }
            )
        invoked = self._invoked.get(request.match_info["token"])
        if invoked is not None and kind == 4:  # CHANNEL_MESSAGE_WITH_SOURCE: the original
            msg = self._bot_message(invoked, data, files)
            invoked["original"] = msg["id"]
            await self._echo("MESSAGE_CREATE", msg)
        interaction = {
            "id": request.match_info["interaction_id"],
            "type": 2,
            "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
        }
        if "with_response" not in request.query:
            return web.Response(status=204)
        return _json({"interaction": interaction, "resource": {"type": kind}})

    def _bot_message(
        self,
        invoked: dict[str, Any],
        payload: dict[str, Any],
        files: list[tuple[str, bytes, str | None]],
    ) -> dict[str, Any]:
        """Record a message the bot posts as an interaction's answer (not a reply)."""
        with self._lock:
            cid, gid = invoked["channel_id"], invoked["guild_id"]
            content = self._check_content(payload.get("content"))
            if not (content or files or payload.get("embeds")):
                raise _ApiError(400, "Cannot send an empty message", 50006)
            msg = self._base_message(cid, gid, self.bot_user, content)
            msg["attachments"] = [self._store_file(cid, n, b, t) for n, b, t in files]
            msg["embeds"] = payload.get("embeds") or []
            msg["flags"] = int(payload.get("flags") or 0)
            self._messages[msg["id"]] = msg
            self._sent.append(
                SentMessage(
                    message_id=msg["id"],
                    channel_id=cid,
                    content=content,
                    reply_to=None,
                    attachments=tuple((n, b) for n, b, _ in files),
                    payload=copy.deepcopy(payload),
                )
            )
            return copy.deepcopy(msg)

    def _invocation(self, request: web.Request) -> dict[str, Any]:
        invoked = self._invoked.get(request.match_info["token"])
        if invoked is None:
            raise _ApiError(404, "Unknown Webhook", 10015)
        return invoked

    async def _followup(self, request: web.Request) -> web.Response:
        """A followup; the first one after a deferred response becomes the original."""
        payload, files = await self._read_body(request)
        invoked = self._invocation(request)
        msg = self._bot_message(invoked, payload, files)
        if invoked["original"] is None:
            invoked["original"] = msg["id"]
        await self._echo("MESSAGE_CREATE", msg)
        if request.query.get("wait") in ("1", "true", "True"):
            return _json(msg)
        return web.Response(status=204)

    def _hook_message_id(self, request: web.Request) -> str | None:
        mid = request.match_info["message_id"]
        return self._invocation(request)["original"] if mid == "@original" else mid

    async def _hook_get(self, request: web.Request) -> web.Response:
        with self._lock:
            msg = self._messages.get(self._hook_message_id(request) or "")
            if msg is None:
                raise _ApiError(404, "Unknown Message", 10008)
            return _json(msg)

    async def _hook_edit(self, request: web.Request) -> web.Response:
        """Edit an interaction's message; editing a deferred ``@original`` creates it."""
        payload, files = await self._read_body(request)
        invoked = self._invocation(request)
        mid = self._hook_message_id(request)
        if mid is None:
            msg = self._bot_message(invoked, payload, files)
            invoked["original"] = msg["id"]
            await self._echo("MESSAGE_CREATE", msg)
            return _json(msg)
        with self._lock:
            msg = self._messages.get(mid)
            if msg is None:
                raise _ApiError(404, "Unknown Message", 10008)
            index = next(i for i, m in enumerate(self._sent) if m.message_id == mid)
            if "content" in payload:
                msg["content"] = self._check_content(payload["content"])
            msg["edited_timestamp"] = iso()
            record = self._sent[index]
            self._sent[index] = replace(
                record, content=msg["content"], edits=record.edits + 1, payload=payload
            )
            snapshot = copy.deepcopy(msg)
        await self._echo("MESSAGE_UPDATE", snapshot)
        return _json(snapshot)

    # -- messages --

    async def _read_body(
        self, request: web.Request
    ) -> tuple[dict[str, Any], list[tuple[str, bytes, str | None]]]:
        """JSON, or multipart with ``payload_json`` and ``files[n]`` (discord.py's shape)."""
        payload: dict[str, Any] = {}
        files: list[tuple[str, bytes, str | None]] = []
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if isinstance(part, BodyPartReader):  # nested multiparts are ignored
                    if part.name == "payload_json":
                        payload = json.loads(await part.text())
                    elif (part.name or "").startswith("files["):
                        data = bytes(await part.read())
                        ctype = part.headers.get("Content-Type")
                        files.append((part.filename or "file", data, ctype))
        elif request.can_read_body:
            payload = await request.json()
        if any(len(b) > self.upload_limit for _, b, _ in files):
            raise _ApiError(413, "Request entity too large", 40005)
        return payload, files

    @staticmethod
    def _check_content(content: Any) -> str:
        text = "" if content is None else str(content)
        if len(text) > MAX_CONTENT:
            raise _form_error(
                "content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length."
            )
        return text

    async def _send_message(self, request: web.Request) -> web.Response:
        payload, files = await self._read_body(request)
        with self._lock:
            channel = self._channel(request)
            cid, gid = channel["id"], channel.get("guild_id")
            content = self._check_content(payload.get("content"))
            if not (
                content
                or files
                or payload.get("embeds")
                or payload.get("sticker_ids")
                or payload.get("components")
                or payload.get("poll")
            ):
                raise _ApiError(400, "Cannot send an empty message", 50006)
            msg = self._base_message(cid, gid, self.bot_user, content)
            msg["attachments"] = [self._store_file(cid, n, b, t) for n, b, t in files]
            msg["embeds"] = payload.get("embeds") or []
            msg["components"] = payload.get("components") or []
            msg["tts"] = bool(payload.get("tts"))
            msg["flags"] = int(payload.get("flags") or 0)
            if payload.get("nonce") is not None:
                msg["nonce"] = payload["nonce"]
            reply_to: str | None = None
            raw_ref = payload.get("message_reference")
            if raw_ref and raw_ref.get("message_id") is not None:
                reply_to = str(raw_ref["message_id"])
                ref, target = self._reference(cid, gid, reply_to)
                if target is None and raw_ref.get("fail_if_not_exists", True):
                    raise _form_error(
                        "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
                    )
                msg["type"], msg["message_reference"] = 19, ref
                msg["referenced_message"] = target
            self._messages[msg["id"]] = msg
            self._sent.append(
                SentMessage(
                    message_id=msg["id"],
                    channel_id=cid,
                    content=content,
                    reply_to=reply_to,
                    attachments=tuple((n, b) for n, b, _ in files),
                    payload=copy.deepcopy(payload),
                )
            )
        await self._echo("MESSAGE_CREATE", msg)
        return _json(msg)

    async def _echo(self, event: str, msg: dict[str, Any]) -> None:
        """Discord also tells the bot about its own messages over the gateway."""
        intent = INTENT_GUILD_MESSAGES if msg.get("guild_id") else INTENT_DIRECT_MESSAGES
        await self._gateway.dispatch(event, msg, intent=intent, required=False)

    def _own_message(self, request: web.Request, action: str) -> tuple[int, dict[str, Any]]:
        cid, mid = request.match_info["channel_id"], request.match_info["message_id"]
        msg = self._messages.get(mid)
        if msg is None or msg["channel_id"] != cid:
            raise _ApiError(404, "Unknown Message", 10008)
        if msg["author"]["id"] != self.bot_id and action == "edit":
            raise _ApiError(403, "Cannot edit a message authored by another user", 50005)
        if msg["author"]["id"] != self.bot_id:
            raise _ApiError(403, "Missing Permissions", 50013)
        index = next(i for i, m in enumerate(self._sent) if m.message_id == mid)
        return index, msg

    async def _get_message(self, request: web.Request) -> web.Response:
        with self._lock:
            self._channel(request)
            msg = self._messages.get(request.match_info["message_id"])
            if msg is None:
                raise _ApiError(404, "Unknown Message", 10008)
            return _json(msg)

    async def _edit_message(self, request: web.Request) -> web.Response:
        payload, files = await self._read_body(request)
        with self._lock:
            index, msg = self._own_message(request, "edit")
            record = self._sent[index]
            cid = msg["channel_id"]
            if "content" in payload:
                msg["content"] = self._check_content(payload["content"])
            if "embeds" in payload:
                msg["embeds"] = payload["embeds"] or []
            kept_files = list(record.attachments)
            if "attachments" in payload or files:
                ids = [str(a.get("id")) for a in payload.get("attachments") or []]
                keep = (
                    set(ids) if "attachments" in payload else {a["id"] for a in msg["attachments"]}
                )
                pairs = [
                    (a, f)
                    for a, f in zip(msg["attachments"], record.attachments, strict=True)
                    if a["id"] in keep
                ]
                new = [self._store_file(cid, n, b, t) for n, b, t in files]
                msg["attachments"] = [a for a, _ in pairs] + new
                kept_files = [f for _, f in pairs] + [(n, b) for n, b, _ in files]
            msg["edited_timestamp"] = iso()
            self._sent[index] = replace(
                record,
                content=msg["content"],
                attachments=tuple(kept_files),
                edits=record.edits + 1,
                payload=copy.deepcopy(payload),
            )
            snapshot = copy.deepcopy(msg)
        await self._echo("MESSAGE_UPDATE", snapshot)
        return _json(snapshot)

    async def _delete(self, request: web.Request) -> web.Response:
        with self._lock:
            index, msg = self._own_message(request, "delete")
            self._sent[index] = replace(self._sent[index], deleted=True)
            del self._messages[msg["id"]]
        gone = {"id": msg["id"], "channel_id": msg["channel_id"]}
        if msg.get("guild_id"):
            gone["guild_id"] = msg["guild_id"]
        await self._echo("MESSAGE_DELETE", gone)
        return web.Response(status=204)
