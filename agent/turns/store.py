"""state.db: the one SQLite connection the sessions, the inbox and the outbox share.

One connection so a turn's record, its reply and "this message is answered" land in one
transaction: after a crash either all three are there or none is. WAL with
synchronous=FULL, so a committed row survives kill -9 and a power cut alike.

The connection lives on a thread of its own, off the event loop, and each operation is one
plain function run there whole: `read` for queries, `write` for a transaction (BEGIN
IMMEDIATE, the function, COMMIT). A turn's reads are one such trip and its writes another,
instead of a trip per statement, cursor and COMMIT. The thread runs one function at a time,
in the order they were asked for, so operations never interleave.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from agent.home import PRIVATE_DIR_MODE, create_private_file

T = TypeVar("T")


class StateDB:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None

    async def open(self, *schemas: str) -> StateDB:
        """Every chat and memory is in here: the file is made 0600 before SQLite opens it,
        and SQLite gives its -wal and -shm the same mode."""
        self.path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        create_private_file(self.path)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="state.db")
        self._conn = await self._run(_connect, self.path, schemas)
        return self

    async def close(self) -> None:
        """Close once what was asked before has run."""
        if self._conn is not None and self._thread is not None:
            conn, self._conn = self._conn, None
            await self._run(conn.close)
            self._thread.shutdown(wait=False)
            self._thread = None

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the database's thread: any number of queries, one trip."""
        return await self._run(fn, self._open())

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` inside one transaction on the database's thread: everything it
        writes commits together, or (when it raises) not at all. The transaction runs to its
        end even when the caller is cancelled meanwhile."""
        return await self._run(_transaction, self._open(), fn)

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        return await self.read(partial(_fetchall, sql, tuple(params)))

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> Any:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("state.db is closed")
        return self._conn

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            raise RuntimeError("state.db is closed")
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)


def _connect(path: Path, schemas: Iterable[str]) -> sqlite3.Connection:
    # Only the database's thread uses it; isolation_level=None: we say where BEGIN goes.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=5000")
    row = conn.execute("PRAGMA journal_mode").fetchone()
    if not row or str(row[0]).lower() != "wal":  # kept in the file: switched once
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    for schema in schemas:
        conn.executescript(schema)
    return conn


def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _fetchall(sql: str, params: tuple[Any, ...], conn: sqlite3.Connection) -> list[Any]:
    return conn.execute(sql, params).fetchall()
