"""MemoryStores as processes open them, on the store the test runs on (`both_stores`): a
state.db file, or a PostgreSQL database, where each store gets a connection of its own (a
PostgresState, as the app's) and the text search agent/app.py gives it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.durable.postgres.pg_connection import PgConnection
from agent.durable.postgres.pg_state import PostgresState
from tools.memory.store import MemoryStore
from tools.memory.text_index import POSTGRES

MAIN = "state.db"


class MemoryStores:
    def __init__(
        self, folder: Path, url: str | None, new_database: Callable[[], str] | None = None
    ) -> None:
        """`url`: the test's PostgreSQL database (None: state.db files in `folder`);
        `new_database`: makes another one, for a store named otherwise."""
        self.folder = folder
        self.url = url
        self._new_database = new_database
        self._urls = {MAIN: url}
        self._states: list[PostgresState] = []

    async def open(self, name: str = MAIN, **kwargs: Any) -> MemoryStore:
        """A store of its own on the database `name` (a file name on SQLite)."""
        if self.url is None:
            return MemoryStore(self.folder / name, **kwargs)
        state = await PostgresState(self._url(name), self.folder).open()
        self._states.append(state)
        return MemoryStore(state, text=POSTGRES, **kwargs)

    def rows(self, sql: str, name: str = MAIN) -> list[tuple[Any, ...]]:
        """What the database holds (the same SQL for both stores)."""
        if self.url is None:
            with sqlite3.connect(self.folder / name) as conn:
                return list(conn.execute(sql).fetchall())
        conn = PgConnection.connect(self._url(name))
        try:
            return [tuple(row) for row in conn.execute(sql).fetchall()]
        finally:
            conn.close()

    def write(self, sql: str, rows: list[tuple[Any, ...]], name: str = MAIN) -> None:
        """`sql` run for each of `rows`, in one transaction (as another process would)."""
        if self.url is None:
            with sqlite3.connect(self.folder / name) as conn:
                conn.executemany(sql, rows)
            return
        conn = PgConnection.connect(self._url(name))
        try:
            with conn.raw.transaction():
                conn.executemany(sql, rows)
        finally:
            conn.close()

    async def close(self) -> None:
        for state in self._states:
            await state.close()

    def _url(self, name: str) -> str:
        if self._urls.get(name) is None:
            assert self._new_database is not None
            self._urls[name] = self._new_database()
        url = self._urls[name]
        assert url is not None
        return url
