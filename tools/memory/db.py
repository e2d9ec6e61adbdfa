"""The memory store's one SQLite connection, kept on a thread of its own.

Opening a connection per call cost more than a recall (the connect, the pragmas, the schema
read again): the connection is opened at the first call and kept. Every call is one trip to
the thread, run whole, one after another, so scoring and the vector scan stay off the event
loop. The state.db that other code and other processes write at the same time is shared
through SQLite's own locking (WAL, busy_timeout, BEGIN IMMEDIATE); no transaction is left
open between calls, and a connection that failed is dropped so the next call opens anew.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from tools.memory import schema

T = TypeVar("T")


class MemoryDB:
    def __init__(self, path: Path, prepare: Callable[[sqlite3.Connection], None]) -> None:
        self.path = path
        self._prepare = prepare  # run once, on the first connection: create, migrate
        self._prepared = False
        self._db: sqlite3.Connection | None = None  # used only on self._thread
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory")

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` on the store's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._with_db, work)

    async def close(self) -> None:
        """Close the connection once what was asked before has run; a later call opens a
        new one."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._close)

    def _with_db(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:
            self._db = schema.connect(self.path)
        db = self._db
        try:
            if not self._prepared:
                self._prepare(db)
                self._prepared = True
            return work(db)
        except sqlite3.Error:
            self._close()  # whatever went wrong, the next call starts on a fresh connection
            raise
        finally:
            if self._db is not None and db.in_transaction:  # never left open between calls
                db.execute("ROLLBACK")

    def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()
