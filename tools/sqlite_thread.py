"""SQLiteThread: one SQLite connection owned by one thread, each read or transaction one trip.

A connection must stay on one thread, and the event loop must not wait on the disk: so the
connection lives on a worker thread of its own, and each operation is one plain function run
there whole, one at a time, in the order asked for, never interleaved. `read` runs the
function as it is (any number of queries, one trip); `write` runs it inside BEGIN IMMEDIATE
... COMMIT, so everything it writes commits together or (when it raises) not at all. Once on
the thread a function runs to its end, COMMIT included, even when its caller is cancelled
meanwhile. No transaction outlives its trip: a failed COMMIT, or one a function left open,
is rolled back, or every later BEGIN on the connection would fail.

Two owners: state.db's StateDB (agent/durable/file/state_db.py) opens it once and closes it for
good; the memory store (tools/memory/db.py) connects at the first call and, with `reopen`,
drops a connection that failed (or was closed) so the next call connects afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
Connect = Callable[[], sqlite3.Connection]


class SQLiteThread:
    def __init__(self, connect: Connect, *, name: str, reopen: bool = False) -> None:
        self.name = name  # the thread's name, and what "... is closed" names
        self._connect = connect  # run on the thread; isolation_level=None: we say where BEGIN goes
        self._reopen = reopen
        self._conn: sqlite3.Connection | None = None  # used only on the thread
        self._opened = False  # connected once: without `reopen`, never again
        self._thread: ThreadPoolExecutor | None = self._new_thread() if reopen else None

    async def open(self) -> SQLiteThread:
        """Connect now; what `connect` raises is raised here, and leaves no thread behind."""
        if self._thread is None:
            self._thread = self._new_thread()
        try:
            await self._run(self._connected)
        except BaseException:
            if not self._reopen:
                self._shut()
            raise
        return self

    async def close(self) -> None:
        """Close once what was asked before has run. With `reopen` a later call connects
        again; without, a later call is refused (RuntimeError)."""
        if self._thread is None:
            return
        await self._run(self._disconnect)
        if not self._reopen:
            self._shut()

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the thread: any number of queries, one trip."""
        return await self._run(self._trip, fn, False)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` inside one transaction on the thread (see the module's note)."""
        return await self._run(self._trip, fn, True)

    def _new_thread(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)

    def _shut(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            raise RuntimeError(f"{self.name} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    # ---- on the thread ----

    def _connected(self) -> sqlite3.Connection:
        if self._conn is None:
            if self._opened and not self._reopen:
                raise RuntimeError(f"{self.name} is closed")
            self._conn = self._connect()
            self._opened = True
        return self._conn

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _trip(self, fn: Callable[[sqlite3.Connection], T], commit: bool) -> T:
        conn = self._connected()
        try:
            return transaction(conn, fn) if commit else fn(conn)
        except sqlite3.Error:
            if self._reopen:
                self._disconnect()  # whatever went wrong, the next call starts afresh
            raise
        finally:
            if conn is self._conn and conn.in_transaction:  # never left open between trips
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")


def transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """BEGIN IMMEDIATE, `fn(conn)`, COMMIT. A COMMIT that fails (a full disk, a deferred
    constraint) leaves SQLite inside the transaction: it is rolled back too."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back itself; the first error counts
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
    return result
