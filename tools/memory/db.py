"""Where the memory store's calls run: state.db's connection of its own (MemoryDB), or any
Database the store is given (PostgreSQL: the process's state connection, agent/durable).

MemoryDB keeps one SQLite connection on a thread of its own (tools/sqlite_thread.py).

Opening a connection per call cost more than a recall (the connect, the pragmas, the schema
read again): the connection is opened at the first call and kept. Every call is one trip to
the thread, run whole, one after another, so scoring and the vector scan stay off the event
loop. The state.db that other code and other processes write at the same time is shared
through SQLite's own locking (WAL, busy_timeout, BEGIN IMMEDIATE); no transaction is left
open between calls, and a connection that failed is dropped so the next call opens anew.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from tools.memory import schema
from tools.sqlite_thread import SQLiteThread

T = TypeVar("T")


class Database(Protocol):
    """Each call one trip on the database's connection: `read` as it is, `write` inside one
    transaction. The connection answers `execute(sql, params)` with `?` placeholders."""

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...


class MemoryDB(SQLiteThread):
    def __init__(self, path: Path, prepare: Callable[[sqlite3.Connection], None]) -> None:
        self.path = path
        self._prepare = prepare  # run once, on the first connection: create, migrate
        self._prepared = False
        super().__init__(self._open_db, name="memory", reopen=True)

    def _open_db(self) -> sqlite3.Connection:
        db = schema.connect(self.path)
        if not self._prepared:
            try:
                self._prepare(db)
            except BaseException:
                db.close()  # the next call connects and prepares again
                raise
            self._prepared = True
        return db
