"""PgConnection: a psycopg connection that the durable layer's functions use as they use
SQLite's.

Those functions are handed a connection and call `execute` / `executemany`, read `fetchone`,
`fetchall` and `rowcount`, and catch sqlite3's exceptions. This gives them the same on
PostgreSQL: each statement goes through pg_sql.statement, Python's booleans go as 0 and 1
(the columns are integers on both stores), a numeric result (SUM of integers) comes back as
a number, not a Decimal, and the server's errors come back as what the callers already
catch — a unique key as sqlite3.IntegrityError; a lost connection, a lock or serialization
conflict as StateBusy (retried with backoff, like SQLite's busy); a full disk as StateFull.
A lock another session holds is waited for as long as state.db's busy timeout, not forever:
then it is StateBusy, as on state.db, instead of a trip that blocks every later one.
A URL libpq cannot parse is a StateError that says so without libpq's words, which quote
the password.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import errors
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from agent.durable.file.state_db import BUSY_TIMEOUT_MS
from agent.durable.file.state_errors import StateBusy, StateError, StateFull
from agent.durable.postgres.pg_sql import statement

_BUSY = (
    psycopg.OperationalError,  # the connection is gone, or the server shuts down
    errors.SerializationFailure,
    errors.DeadlockDetected,
    errors.LockNotAvailable,
    errors.QueryCanceled,
)
UNREADABLE_URL = (
    "the PostgreSQL URL cannot be parsed: write it as postgresql://user:password@host:5432/name, "
    "the password's special characters percent-encoded (% as %25, @ as %40, a space as %20)"
)


class NumberLoader(Loader):
    """numeric as int when whole, else float: what SQLite gives for the same SUM."""

    def load(self, data: Any) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class PgCursor:
    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn
        conn.adapters.register_loader("numeric", NumberLoader)

    @classmethod
    def connect(cls, url: str, *, timeout_s: float = 10.0) -> PgConnection:
        readable(url)
        try:
            conn = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=max(1, int(timeout_s)),
                application_name="pinclaw",
                options=f"-c lock_timeout={BUSY_TIMEOUT_MS}",
            )
        except psycopg.Error as exc:
            raise state_error(exc) from exc
        conn.cursor_factory = psycopg.RawCursor
        return cls(conn)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != TransactionStatus.IDLE

    @property
    def usable(self) -> bool:
        return not (self.raw.closed or self.raw.broken)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        cursor = self.raw.cursor()
        try:
            cursor.execute(statement(sql), _values(params))
        except psycopg.Error as exc:
            raise state_error(exc) from exc
        return PgCursor(cursor)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PgCursor:
        cursor = self.raw.cursor()
        try:
            cursor.executemany(statement(sql), [_values(row) for row in rows])
        except psycopg.Error as exc:
            raise state_error(exc) from exc
        return PgCursor(cursor)

    def close(self) -> None:
        self.raw.close()


def readable(url: str) -> None:
    """StateError when libpq cannot parse `url`: its own words would quote the password
    (`invalid percent-encoded token: "..."`), so they are left out, with their traceback."""
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise StateError(UNREADABLE_URL) from None


def state_error(exc: psycopg.Error) -> Exception:
    """The exception the durable layer's callers catch for the server's `exc`."""
    if isinstance(exc, errors.DiskFull):
        return StateFull(f"the PostgreSQL server's disk is full ({exc})")
    if isinstance(exc, _BUSY):
        return StateBusy(f"PostgreSQL: {exc}".strip())
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(str(exc))
    if isinstance(exc, errors.UndefinedTable):
        return sqlite3.OperationalError(f"no such table ({exc})")
    if isinstance(exc, psycopg.DataError | psycopg.ProgrammingError):
        return exc  # our own SQL or values are wrong: a bug, seen as it is
    return StateError(f"PostgreSQL: {exc}")


def _values(params: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(int(value) if isinstance(value, bool) else value for value in params)
