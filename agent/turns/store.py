"""state.db: the one SQLite connection the sessions, the inbox and the outbox share.

One connection so a turn's record, its reply and "this message is answered" land in one
transaction: after a crash either all three are there or none is. WAL with
synchronous=FULL, so a committed row survives kill -9 and a power cut alike; the I/O runs
on aiosqlite's thread, off the event loop. One operation at a time (interleaving a read
cursor with another coroutine's commit on a shared connection makes sqlite3 fail).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite


class StateDB:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    async def open(self, *schemas: str) -> StateDB:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path, isolation_level=None)
        await self._db.execute("PRAGMA busy_timeout=5000")
        async with self._db.execute("PRAGMA journal_mode") as cursor:
            row = await cursor.fetchone()
        if not row or str(row[0]).lower() != "wal":  # kept in the file: switched once
            await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=FULL")
        for schema in schemas:
            await self._db.executescript(schema)
        return self

    async def close(self) -> None:
        async with self._lock:
            if self._db is not None:
                await self._db.close()
                self._db = None

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("state.db is closed")
        return self._db

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """Everything inside commits together, or not at all."""
        async with self._lock:
            db = self._conn()
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        async with self._lock, self._conn().execute(sql, tuple(params)) as cursor:
            return list(await cursor.fetchall())

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> Any:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None
