"""SharedClaims: what one pinclaw process holds while others share the PostgreSQL store.

Each claim is a session-level advisory lock, `pg_try_advisory_lock(hashtext(kind),
hashtext(key))`, on a connection of its own: never waited for (a chat another process
answers is that process's), and let go by the server the moment its process dies — kill -9
closes the socket — so another process takes a role over at its next try. Two keys whose
hashes meet only share a lock: two chats then take turns, nothing worse.

`announce` is a NOTIFY on channel "pinclaw"; every process LISTENs on a second connection and
hands each (kind, key) to its listeners (a chat's queue wakes). The roles held are in the
connection's application_name, so `agent doctor` reads who holds what from pg_stat_activity
and a dead process vanishes from it by itself.

A claims connection that breaks loses every lock with it: the process forgets them, connects
again at the next claim and takes its roles again if nobody else has. A turn that ran on
meanwhile cannot be answered twice all the same: the inbox row's commit is fenced
(agent/durable/inbox.py, `finish`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import psycopg

log = logging.getLogger(__name__)

CHANNEL = "pinclaw"
NAME_LIMIT = 63  # PostgreSQL keeps this many bytes of an application_name
# pg_locks shows a lock of two int4 keys as classid, objid (unsigned) and objsubid 2.
HELD_ELSEWHERE = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND objsubid = 2 AND classid = (hashtext($1)::int8 & 4294967295)::oid"
    " AND objid = (hashtext($2)::int8 & 4294967295)::oid AND pid <> pg_backend_pid())"
)


def process_name() -> str:
    """host:pid, how this process is named to the others and in `agent doctor`."""
    return f"{socket.gethostname()}:{os.getpid()}"


class SharedClaims:
    shared = True

    def __init__(self, url: str) -> None:
        self._url = url
        self.name = process_name()
        self._locks: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the locks' connection
        self._held: set[tuple[str, str]] = set()
        self._listeners: list[Callable[[str, str], None]] = []
        self._lost: list[Callable[[], None]] = []
        self._hearing: asyncio.Task[None] | None = None

    async def open(self) -> SharedClaims:
        await self._connection()
        self._hearing = asyncio.create_task(self._hear(), name="claims: listen")
        return self

    async def take(self, kind: str, key: str) -> bool:
        """Held now; False also when the server cannot be asked (nothing is held then)."""
        if (kind, key) in self._held:
            return True
        try:
            taken = await self._ask(
                "SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))", kind, key
            )
            if taken:
                self._held.add((kind, key))
                if kind == "role":
                    await self._show_roles()
        except psycopg.Error as exc:  # the connection broke: every claim went with it
            log.warning("claims: %s %s not taken: %s", kind, key, _first_line(exc))
            return False
        return bool(taken)

    async def give_back(self, kind: str, key: str) -> None:
        if (kind, key) not in self._held:
            return
        self._held.discard((kind, key))
        try:
            await self._ask("SELECT pg_advisory_unlock(hashtext($1), hashtext($2))", kind, key)
            if kind == "role":
                await self._show_roles()
        except psycopg.Error:  # the connection broke, and the lock with it
            return

    async def announce(self, kind: str, key: str) -> None:
        await self._ask("SELECT pg_notify($1, $2)", CHANNEL, f"{kind}\t{key}")

    async def held_elsewhere(self, kind: str, key: str) -> bool:
        """Another process holds the claim now (a turn of the chat runs there); False when
        the server cannot be asked."""
        try:
            return bool(await self._ask(HELD_ELSEWHERE, kind, key))
        except psycopg.Error:
            return False

    def hear(self, listener: Callable[[str, str], None]) -> None:
        self._listeners.append(listener)

    def holds(self) -> list[str]:
        return sorted(f"{kind} {key}" for kind, key in self._held)

    def on_lost(self, listener: Callable[[], None]) -> None:
        self._lost.append(listener)

    async def check(self) -> None:
        await self._ask("SELECT 1")

    async def close(self) -> None:
        if self._hearing is not None:
            self._hearing.cancel()
            with contextlib.suppress(BaseException):
                await self._hearing
        if self._locks is not None:
            with contextlib.suppress(psycopg.Error):
                await self._locks.close()  # the server lets every lock go with it
        self._held.clear()

    # ---- the connections ----

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._locks is None or self._locks.closed or self._locks.broken:
            if self._locks is not None:
                self._let_go()
            self._locks = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, application_name=self._roles_line()
            )
            self._locks.cursor_factory = psycopg.AsyncRawCursor
        return self._locks

    async def _ask(self, sql: str, *params: str) -> Any:
        async with self._lock:
            conn = await self._connection()
            try:
                row = await (await conn.execute(sql, params)).fetchone()
            except psycopg.OperationalError:
                self._let_go()  # the locks went with the connection
                raise
        return row[0] if row else None

    def _let_go(self) -> None:
        if self._held:
            log.warning("claims: the connection to PostgreSQL broke; every claim is let go")
        self._held.clear()
        for listener in self._lost:
            listener()

    async def _show_roles(self) -> None:
        await self._ask("SELECT set_config('application_name', $1, false)", self._roles_line())

    def _roles_line(self) -> str:
        roles = " ".join(sorted(key for kind, key in self._held if kind == "role"))
        return f"pinclaw {self.name} {roles}".strip()[:NAME_LIMIT]

    async def _hear(self) -> None:
        """LISTEN, handing each announcement to the listeners; connect again when it breaks."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    async for note in conn.notifies():
                        kind, _, key = note.payload.partition("\t")
                        for listener in self._listeners:
                            listener(kind, key)
            except psycopg.Error as exc:
                log.warning("claims: not hearing the other processes (%s); again in 1 s", exc)
                await asyncio.sleep(1.0)


def sharing_processes(url: str) -> list[tuple[str, str]]:
    """(host:pid, the roles it holds) of each pinclaw process on the store now, the oldest
    first: read from pg_stat_activity, where a dead process is gone by itself."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        names = conn.execute(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE application_name LIKE 'pinclaw %' AND datname = current_database()"
            " ORDER BY backend_start"
        ).fetchall()
    found = []
    for (name,) in names:
        _, who, roles = f"{name}  ".split(" ", 2)
        found.append((who, roles.strip()))
    return found


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
