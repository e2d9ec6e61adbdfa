"""PostgresState: the durable layer on PostgreSQL (`[state] url`), in place of state.db.

It is a StateDB to everything that uses one — `read(fn)`, `write(fn)`, `fetchall`,
`fetchone`, `health` — so the inbox, the outbox, the sessions and every other table module
run unchanged: their functions get a PgConnection (pg_connection.py), which runs their SQL
on the server. The process keeps one connection on a thread of its own (pg_thread.py), as
it does for state.db; a connection the server or the network dropped is made again at the
next trip, and the trip that failed is StateBusy, which every caller already retries.

Opening makes the tables when the database has none (pg_schema.py) and refuses, with one line
that names the server (its password left out) and what to do, a server that cannot be
reached, a database that is another program's, or one a newer pinclaw made. `health` watches
the home's own disk, where the workspace and the logs still are.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg

from agent.durable.file.state_db import Migrate, StateDB, StateDBUnusable
from agent.durable.file.state_errors import StateBusy, StateError
from agent.durable.file.storage_health import StorageHealth
from agent.durable.postgres import pg_schema
from agent.durable.postgres.pg_connection import UNREADABLE_URL, PgConnection
from agent.durable.postgres.pg_thread import PgThread

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10.0
STORE = "PostgreSQL state"


class PostgresState(StateDB):
    def __init__(self, url: str, home: Path) -> None:
        self.url = url
        self.where = shown_url(url)
        self.path = home / "state.db"  # what a home's files are found beside (backups, logs)
        self._thread: PgThread | None = None
        self.health = StorageHealth(home, probe=self._probe)

    async def open(
        self, *schemas: str, migrate: Migrate | None = None, wait_s: float = CONNECT_TIMEOUT_S
    ) -> PostgresState:
        """Connect and make the tables when missing; StateDBUnusable when the server cannot
        be used. (`schemas` and `migrate` are state.db's: the tables here are pg_schema's.)"""
        thread = PgThread(self._connect_made, name="postgres")
        try:
            await thread.open()
        except (StateError, pg_schema.SchemaRefused) as exc:
            await thread.close()
            raise self.unusable(exc) from exc
        self._thread = thread
        return self

    def unusable(self, exc: BaseException) -> StateDBUnusable:
        """The one line for a server that cannot be used."""
        if isinstance(exc, pg_schema.SchemaRefused):
            advice = "point [state] url at a database of pinclaw's own"
            return StateDBUnusable(self.where, str(exc), advice, store=STORE)
        what = "cannot connect" if isinstance(exc, StateBusy) else "cannot be used"
        advice = (
            "check [state] url (or PINCLAW_STATE__URL in agent.env) and that the server runs "
            "and lets this user in; `agent doctor` says more"
        )
        if str(exc) == UNREADABLE_URL:  # no server was asked
            advice = "correct [state] url (or PINCLAW_STATE__URL in agent.env)"
        return StateDBUnusable(self.where, f"{what} ({_first_line(exc)})", advice, store=STORE)

    async def _probe(self) -> None:
        await self.read(lambda conn: conn.execute("SELECT 1").fetchall())

    def _connect_made(self) -> PgConnection:
        """On the thread: a connection, the tables made on the first one."""
        conn = PgConnection.connect(self.url, timeout_s=CONNECT_TIMEOUT_S)
        try:
            pg_schema.ensure(conn.raw)
        except psycopg.Error as exc:
            conn.close()
            raise StateError(f"PostgreSQL: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn


def shown_url(url: str) -> str:
    """The URL as logs and messages may show it: the password left out."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unreadable url)"
    user = str(info.get("user") or "")
    host = str(info.get("host") or "localhost")
    port = str(info.get("port") or "5432")
    name = str(info.get("dbname") or user)
    return f"postgresql://{user + '@' if user else ''}{host}:{port}/{name}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def is_postgres_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))
