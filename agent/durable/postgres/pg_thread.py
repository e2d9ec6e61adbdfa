"""PgThread: the process's one PostgreSQL connection for the durable layer, on a thread of its
own, each read or transaction one trip — as SQLiteThread does for state.db.

The thread, the queue of trips and the connect-on-first-use come from SQLiteThread; what
differs is the trip: a write is psycopg's transaction (BEGIN … COMMIT, rolled back when the
function raises); a read runs its statements as they come, each on its own, as state.db's
reads do — no BEGIN and COMMIT around them, two round trips a read saved (about 30 a
message: bench/several_processes.py). A connection the server dropped is let go, so the next
trip connects afresh while the failed one is reported as StateBusy and retried by its caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import psycopg

from agent.durable.postgres.pg_connection import PgConnection, state_error
from tools.sqlite_thread import SQLiteThread

T = TypeVar("T")


class PgThread(SQLiteThread):
    def __init__(self, connect: Callable[[], PgConnection], *, name: str) -> None:
        super().__init__(cast(Any, connect), name=name, reopen=True)

    def _trip(self, fn: Callable[[Any], T], commit: bool) -> T:
        conn = cast(PgConnection, self._connected())
        try:
            if not commit:
                return fn(conn)
            with conn.raw.transaction():
                return fn(conn)
        except psycopg.Error as exc:  # COMMIT or ROLLBACK itself failed
            raise state_error(exc) from exc
        finally:
            if not conn.usable:
                self._disconnect()
