"""Conversation history per chat, in SQLite (WAL; the I/O runs off the event loop).

A chat's messages are grouped in turns: each turn starts with the user's message and holds
the assistant and tool messages that answered it. History is cut only at turn boundaries,
so a tool result is never sent without the call it answers. The system prompt and the
delivery instructions are never stored: they are rebuilt, not remembered.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

Message = dict[str, Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chats (
    chat_key TEXT PRIMARY KEY,
    session INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_key TEXT NOT NULL,
    session INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_chat ON messages (chat_key, session, id);
"""


class SessionStore:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: aiosqlite.Connection | None = None
        # One operation at a time: interleaving a read cursor with another coroutine's
        # commit on the shared connection makes sqlite3 fail ("API misuse").
        self._lock = asyncio.Lock()

    async def open(self) -> SessionStore:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self._path)
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=NORMAL")
        await self._db.executescript(_SCHEMA)
        await self._db.commit()
        return self

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("SessionStore.open() was not awaited")
        return self._db

    async def _session(self, chat_key: str) -> int:
        async with self.db.execute(
            "SELECT session FROM chats WHERE chat_key = ?", (chat_key,)
        ) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 1

    async def history(self, chat_key: str, max_messages: int) -> list[Message]:
        """The last `max_messages` messages of the chat's session, starting at a turn."""
        async with self._lock:
            return await self._history(chat_key, max_messages)

    async def _history(self, chat_key: str, max_messages: int) -> list[Message]:
        session = await self._session(chat_key)
        async with self.db.execute(
            "SELECT turn, position, message FROM messages WHERE chat_key = ? AND session = ? "
            "ORDER BY id DESC LIMIT ?",
            (chat_key, session, max_messages),
        ) as cursor:
            rows = list(reversed(list(await cursor.fetchall())))
        while rows and rows[0][1] != 0:  # the oldest turn is cut: drop its remainder
            first_turn = rows[0][0]
            rows = [row for row in rows if row[0] != first_turn]
        return [json.loads(row[2]) for row in rows]

    async def append_turn(self, chat_key: str, messages: Sequence[Message]) -> None:
        """Store one turn: the user's message first, then what answered it."""
        if messages:
            async with self._lock:
                await self._append_turn(chat_key, messages)

    async def _append_turn(self, chat_key: str, messages: Sequence[Message]) -> None:
        session = await self._session(chat_key)
        async with self.db.execute(
            "SELECT COALESCE(MAX(turn), 0) FROM messages WHERE chat_key = ? AND session = ?",
            (chat_key, session),
        ) as cursor:
            row = await cursor.fetchone()
        turn = (int(row[0]) if row else 0) + 1
        now = time.time()
        await self.db.executemany(
            "INSERT INTO messages (chat_key, session, turn, position, role, message, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    chat_key,
                    session,
                    turn,
                    position,
                    message.get("role", ""),
                    json.dumps(message, ensure_ascii=False),
                    now,
                )
                for position, message in enumerate(messages)
            ],
        )
        await self.db.commit()

    async def new_session(self, chat_key: str) -> None:
        """Start the chat afresh; the old messages stay in the file but leave the history."""
        async with self._lock:
            await self._new_session(chat_key)

    async def _new_session(self, chat_key: str) -> None:
        session = await self._session(chat_key)
        await self.db.execute(
            "INSERT INTO chats (chat_key, session) VALUES (?, ?) "
            "ON CONFLICT(chat_key) DO UPDATE SET session = excluded.session",
            (chat_key, session + 1),
        )
        await self.db.commit()

    async def count(self, chat_key: str) -> int:
        async with self._lock:
            return await self._count(chat_key)

    async def _count(self, chat_key: str) -> int:
        session = await self._session(chat_key)
        async with self.db.execute(
            "SELECT COUNT(*) FROM messages WHERE chat_key = ? AND session = ?",
            (chat_key, session),
        ) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0
