"""Store: the durable tables every channel's runtime keeps its chats in, and the claims that
let several processes share them.

A claim (`Claims.take(kind, key)`) is what one process holds and the others do not: a chat's
turns ("turns", its key), its sending ("sends"), a role ("role", "intake:telegram"). On state.db
there is one process, so every claim is its own (`OneProcess`); on PostgreSQL they are the
server's advisory locks (agent/durable/postgres/pg_claims.py), let go when their process dies.
`announce` tells the other processes there is news for a key (a message stored for a chat),
and `hear` is how a process listens for it.

`read_state` is how a command that does not run the daemon reads the store beside it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent.durable.file.migrations import LegacyScope, migrate
from agent.durable.file.state_db import StateDB
from agent.durable.file.state_errors import StateError
from agent.durable.inbox import Inbox
from agent.durable.outbox import Outbox
from agent.durable.sessions import SessionStore
from tools.memory.store import chat_scope

if TYPE_CHECKING:
    from agent.config import Settings

T = TypeVar("T")
News = Callable[[str, str], None]  # (kind, key): another process stored something for it


class Claims(Protocol):
    shared: bool  # other processes use the same store

    async def take(self, kind: str, key: str) -> bool: ...  # held by this process now

    async def give_back(self, kind: str, key: str) -> None: ...

    async def announce(self, kind: str, key: str) -> None: ...

    async def held_elsewhere(self, kind: str, key: str) -> bool: ...  # by another process

    def hear(self, listener: News) -> None: ...

    def holds(self) -> list[str]: ...  # "kind key" of each claim held, for `agent doctor`

    def on_lost(self, listener: Callable[[], None]) -> None: ...  # every claim was let go

    async def check(self) -> None: ...  # a round trip: finds a broken connection out

    async def close(self) -> None: ...


class OneProcess:
    """state.db's claims: this process is the only one, so it holds everything."""

    shared = False

    async def take(self, kind: str, key: str) -> bool:
        return True

    async def give_back(self, kind: str, key: str) -> None:
        return None

    async def announce(self, kind: str, key: str) -> None:
        return None

    async def held_elsewhere(self, kind: str, key: str) -> bool:
        return False

    def hear(self, listener: News) -> None:
        return None

    def holds(self) -> list[str]:
        return []

    def on_lost(self, listener: Callable[[], None]) -> None:
        return None

    async def check(self) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class Store:
    """The tables and the claims on them."""

    db: StateDB
    sessions: SessionStore
    inbox: Inbox
    outbox: Outbox
    claims: Claims = field(default_factory=OneProcess)

    async def close(self) -> None:
        """Let go of the claims, then the tables: on PostgreSQL each holds connections."""
        await self.claims.close()
        await self.db.close()


async def open_store(
    path: Path,
    *,
    url: str | None = None,
    workspace: Path | None = None,
    legacy_scope: LegacyScope = chat_scope,
) -> Store:
    """state.db with its tables at this pinclaw's schema version (agent/durable/file/migrations.py):
    sessions, inbox, outbox, schedules, memories, the tool journal; or, with `url`, the same
    tables in PostgreSQL (agent/durable/postgres/), `path`'s folder still the home, with the
    claims of a process among several — and `workspace` (the daemon's) checked to be the one
    they share. StateDBUnusable when it cannot be used (one line to show). `legacy_scope`:
    where memories from before scopes go when an old file is brought up to date."""
    if url is None:
        db = await StateDB(path).open(
            migrate=partial(migrate, path=path, legacy_scope=legacy_scope)
        )
        return Store(db, await SessionStore.open(db), await Inbox.open(db), Outbox(db))
    from agent.durable.postgres.pg_claims import SharedClaims
    from agent.durable.postgres.pg_state import PostgresState
    from agent.durable.postgres.shared_home import check_workspace

    shared = await PostgresState(url, path.parent).open()
    try:
        if workspace is not None:
            await check_workspace(shared, workspace, shared.where)
        claims = await SharedClaims(url).open()
    except BaseException:
        await shared.close()
        raise
    sessions, inbox = await SessionStore.open(shared), await Inbox.open(shared)
    return Store(shared, sessions, inbox, Outbox(shared), claims)


def read_state(settings: Settings, fn: Callable[[Any], T]) -> T | None:
    """`fn(connection)` on the home's store — state.db, or the PostgreSQL database of
    `[state] url` — through a connection of its own that writes nothing, so it is safe beside
    a running daemon; None when there is no state.db yet or `fn`'s table is not there yet
    (an older file, a database no pinclaw has started on). A server that cannot be reached
    is StateDBUnusable: its one line names the server, never the password."""
    try:
        return _read(settings, fn)
    except sqlite3.OperationalError as exc:  # PostgreSQL's missing table is said so too
        if "no such table" not in str(exc):
            raise
        return None


def _read(settings: Settings, fn: Callable[[Any], T]) -> T | None:
    url = settings.state_url
    if url is None:
        if not settings.state_db.is_file():
            return None
        uri = f"{settings.state_db.resolve().as_uri()}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as conn:
            return fn(conn)
    from agent.durable.postgres.pg_connection import PgConnection
    from agent.durable.postgres.pg_state import PostgresState

    try:
        server = PgConnection.connect(url)
    except StateError as exc:
        raise PostgresState(url, settings.home).unusable(exc) from exc
    try:
        return fn(server)
    finally:
        server.close()
