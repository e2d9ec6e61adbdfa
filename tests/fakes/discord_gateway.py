"""Gateway half of the Discord double: payload shapes, sessions, HELLO/IDENTIFY/RESUME.

The REST half (``discord_state.py`` holds the world: guilds, channels, messages) calls
``Gateway.dispatch`` to push events; this module only knows the wire protocol, so the shapes
discord.py's parsers need (``state.py``, ``guild.py``, ``message.py``) live in one place.

Frames are plain text JSON: discord.py asks for ``compress=zlib-stream`` (or ``zstd-stream``
when ``zstandard`` / Python 3.14's ``compression.zstd`` is importable) but it only
decompresses BINARY frames and parses TEXT frames as they are, so no compression is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

__all__ = [
    "EVERYONE_PERMISSIONS",
    "INTENT_DIRECT_MESSAGES",
    "INTENT_GUILDS",
    "INTENT_GUILD_MESSAGES",
    "INTENT_MESSAGE_CONTENT",
    "Gateway",
    "Snowflakes",
    "application_payload",
    "dm_channel_payload",
    "guild_payload",
    "iso",
    "member_payload",
    "message_payload",
    "ready_payload",
    "text_channel_payload",
    "thread_payload",
    "user_payload",
]

OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_RESUME = 0, 1, 2, 6
OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 9, 10, 11

INTENT_GUILDS = 1 << 0
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
ALL_INTENTS = (1 << 26) - 1

DISCORD_EPOCH_MS = 1_420_070_400_000
# view, send, embed, attach, history, reactions, external emoji, app commands, threads
EVERYONE_PERMISSIONS = str(sum(1 << b for b in (6, 10, 11, 14, 15, 16, 18, 31, 35, 36, 38)))


class Snowflakes:
    """Unique, increasing Discord-style ids (timestamp in the high bits, like the real ones)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> str:
        with self._lock:
            now = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
            self._last = max(self._last + 1, now)
            return str(self._last)


def iso(ts: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).isoformat()


def user_payload(user_id: str, username: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": username,
        "discriminator": "0",
        "global_name": None if bot else username,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def member_payload(joined_at: str) -> dict[str, Any]:
    """The partial member Discord attaches to guild messages and mentions (no ``user``)."""
    return {"roles": [], "joined_at": joined_at, "deaf": False, "mute": False, "flags": 0}


def text_channel_payload(
    channel_id: str, guild_id: str, name: str, position: int
) -> dict[str, Any]:
    return {
        "id": channel_id,
        "type": 0,
        "guild_id": guild_id,
        "name": name,
        "position": position,
        "parent_id": None,
        "topic": None,
        "nsfw": False,
        "permission_overwrites": [],
        "rate_limit_per_user": 0,
        "last_message_id": None,
    }


def thread_payload(
    channel_id: str, guild_id: str, parent_id: str, name: str, owner_id: str
) -> dict[str, Any]:
    """A public thread (type 11); ``thread_metadata`` and counts are required by discord.py."""
    return {
        "id": channel_id,
        "type": 11,
        "guild_id": guild_id,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": iso(),
            "locked": False,
        },
    }


def dm_channel_payload(channel_id: str, recipient: dict[str, Any]) -> dict[str, Any]:
    return {"id": channel_id, "type": 1, "recipients": [recipient], "last_message_id": None}


def message_payload(
    message_id: str,
    channel_id: str,
    guild_id: str | None,
    author: dict[str, Any],
    content: str,
    mentions: list[dict[str, Any]],
    joined_at: str | None,
) -> dict[str, Any]:
    """A plain message (type 0); guild messages carry ``guild_id`` and the author's member."""
    msg: dict[str, Any] = {
        "id": message_id,
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": iso(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions,
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "components": [],
        "pinned": False,
        "type": 0,
        "flags": 0,
    }
    if guild_id:
        msg["guild_id"] = guild_id
        msg["member"] = member_payload(joined_at or iso())
    return msg


def ready_payload(bot_user: dict[str, Any], guild_ids: list[str]) -> dict[str, Any]:
    """READY without session fields; guilds start unavailable and GUILD_CREATE fills them."""
    return {
        "v": 10,
        "user": {**bot_user, "verified": True, "mfa_enabled": False, "flags": 0},
        "guilds": [{"id": gid, "unavailable": True} for gid in guild_ids],
        "private_channels": [],
        "relationships": [],
        "user_settings": {},
        "session_type": "normal",
        "application": {"id": bot_user["id"], "flags": 0},
    }


def guild_payload(
    guild_id: str,
    name: str,
    joined_at: str,
    channels: list[dict[str, Any]],
    bot_user: dict[str, Any],
) -> dict[str, Any]:
    """GUILD_CREATE: channels and threads for discord.py's cache, the bot as the only member
    (so ``guild.me`` and mentions of the bot resolve), and an @everyone role."""
    everyone = {
        "id": guild_id,
        "name": "@everyone",
        "permissions": EVERYONE_PERMISSIONS,
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    return {
        "id": guild_id,
        "name": name,
        "icon": None,
        "owner_id": "1",
        "unavailable": False,
        "large": False,
        "member_count": 2,
        "joined_at": joined_at,
        "roles": [everyone],
        "emojis": [],
        "stickers": [],
        "features": [],
        "channels": [c for c in channels if c["type"] != 11],
        "threads": [c for c in channels if c["type"] == 11],
        "members": [{**member_payload(joined_at), "user": bot_user}],
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "afk_timeout": 300,
    }


def application_payload(bot_user: dict[str, Any]) -> dict[str, Any]:
    """``GET /oauth2/applications/@me``, which ``Client.login`` calls after ``/users/@me``."""
    return {
        "id": bot_user["id"],
        "name": bot_user["username"],
        "icon": None,
        "description": "",
        "summary": "",
        "bot_public": True,
        "bot_require_code_grant": False,
        "verify_key": "0" * 64,
        "owner": user_payload("1", "owner"),
        "team": None,
        "flags": 0,
        "bot": bot_user,
        "interactions_endpoint_url": None,
    }


@dataclass(eq=False)
class _Session:
    """One gateway session: survives its socket so RESUME can replay what was missed."""

    session_id: str
    intents: int
    seq: int = 0
    ws: web.WebSocketResponse | None = None
    sent: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=2000))
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Gateway:
    """Websocket gateway; runs on the fake's event loop (all coroutines must run there)."""

    def __init__(
        self,
        *,
        token: str,
        heartbeat_interval_ms: int,
        resume_url: Callable[[], str],
        ready_data: Callable[[], dict[str, Any]],
        guilds: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.token = token
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._resume_url = resume_url
        self._ready_data = ready_data
        self._guilds = guilds
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stats_lock = threading.Lock()
        self.identifies: list[dict[str, Any]] = []  # IDENTIFY ``d`` without the token
        self.resumes = 0
        self.connections: list[dict[str, str]] = []  # query string of every connection

    # ---- state readable from any thread ----

    @property
    def connected(self) -> bool:
        session = self._current
        return session is not None and session.ws is not None and not session.ws.closed

    @property
    def has_session(self) -> bool:
        return self._current is not None

    # ---- websocket handler ----

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(timeout=2.0, max_msg_size=0)
        await ws.prepare(request)
        with self._stats_lock:
            self.connections.append(dict(request.query))
        self._sockets.add(ws)
        session: _Session | None = None
        try:
            hello = {"heartbeat_interval": self.heartbeat_interval_ms}
            await ws.send_str(json.dumps({"op": OP_HELLO, "d": hello, "s": None, "t": None}))
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(msg.data)
                op, data = payload.get("op"), payload.get("d")
                if op == OP_HEARTBEAT:
                    await ws.send_str(json.dumps({"op": OP_HEARTBEAT_ACK, "d": None}))
                elif op == OP_IDENTIFY and session is None:
                    session = await self._identify(ws, data or {})
                elif op == OP_RESUME and session is None:
                    session = await self._resume(ws, data or {})
                elif op in (OP_IDENTIFY, OP_RESUME):
                    await ws.close(code=4005, message=b"Already authenticated.")
        finally:
            self._sockets.discard(ws)
            if session is not None and session.ws is ws:
                session.ws = None
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> _Session | None:
        if data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        with self._stats_lock:
            self.identifies.append({k: v for k, v in data.items() if k != "token"})
        intents = data.get("intents")
        session = _Session(uuid.uuid4().hex, ALL_INTENTS if intents is None else int(intents))
        self._sessions[session.session_id] = session
        self._current = session
        async with session.lock:
            session.ws = ws
            ready = {
                **self._ready_data(),
                "session_id": session.session_id,
                "resume_gateway_url": self._resume_url(),
            }
            if "shard" in data:  # AutoShardedClient reads it back
                ready["shard"] = data["shard"]
            await self._emit(session, "READY", ready)
            for guild in self._guilds():
                await self._emit(session, "GUILD_CREATE", guild)
        return session

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> _Session | None:
        if data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        session = self._sessions.get(str(data.get("session_id")))
        if session is None:
            await ws.send_str(json.dumps({"op": OP_INVALID_SESSION, "d": False}))
            return None
        with self._stats_lock:
            self.resumes += 1
        self._current = session
        async with session.lock:
            old, session.ws = session.ws, ws
            if old is not None and old is not ws:
                self._spawn(old.close(code=4000))
            last = data.get("seq") or 0
            for seq, frame in list(session.sent):
                if seq > last:
                    await ws.send_str(frame)
            await self._emit(session, "RESUMED", {})
        return session

    async def _emit(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        """Sequence, remember (for RESUME) and send one DISPATCH; caller holds session.lock."""
        session.seq += 1
        frame = json.dumps({"op": OP_DISPATCH, "t": event, "s": session.seq, "d": data})
        session.sent.append((session.seq, frame))
        ws = session.ws
        if ws is None or ws.closed:
            return
        try:
            await ws.send_str(frame)
        except (ConnectionError, RuntimeError):
            session.ws = None  # the client will RESUME and get it replayed

    # ---- control (call on the fake's loop) ----

    async def dispatch(
        self,
        event: str,
        data: dict[str, Any],
        *,
        intent: int = 0,
        content_gated: bool = False,
        required: bool = True,
    ) -> bool:
        """Send an event to the current session, filtered by its intents like Discord does.

        ``content_gated``: blank content/attachments/embeds unless MESSAGE_CONTENT was asked
        for. Returns False when filtered out; raises if nobody ever connected and
        ``required``.
        """
        session = self._current
        if session is None:
            if required:
                raise RuntimeError("no gateway session: is the discord.py client connected?")
            return False
        if intent and not session.intents & intent:
            return False
        if content_gated and not session.intents & INTENT_MESSAGE_CONTENT:
            data = {**data, "content": "", "attachments": [], "embeds": [], "components": []}
        async with session.lock:
            await self._emit(session, event, data)
        return True

    async def drop(self, code: int) -> bool:
        """Close the current socket without waiting for the client's reply (its loop may be
        blocked on us); later events are buffered and replayed on RESUME."""
        session = self._current
        if session is None or session.ws is None:
            return False
        async with session.lock:
            ws, session.ws = session.ws, None
        if ws is not None:
            self._spawn(ws.close(code=code, message=b"dropped by FakeDiscord"))
        return True

    async def close_all(self) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(code=1001), 1.0)
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
