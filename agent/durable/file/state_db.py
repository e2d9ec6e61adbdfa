"""state.db: the one SQLite connection the sessions, the inbox and the outbox share.

One connection so a turn's record, its reply and "this message is answered" land in one
transaction: after a crash either all three are there or none is. WAL with
synchronous=FULL, so a committed row survives kill -9 and a power cut alike.

The connection lives on a thread of its own, off the event loop (tools/sqlite_thread.py),
and each operation is one plain function run there whole: `read` for queries, `write` for a
transaction (BEGIN IMMEDIATE, the function, COMMIT). A turn's reads are one such trip and its
writes another, instead of a trip per statement, cursor and COMMIT. The thread runs one
function at a time, in the order they were asked for, so operations never interleave.

Opening refuses a file that cannot be used — a folder, not a database, damaged, read-only,
locked by another process for longer than LOCK_WAIT_S, another program's or a newer
pinclaw's (agent/durable/file/migrations.py) — with StateDBUnusable: one line naming the file,
the problem and what to do. Once open, a read or write that fails because the file is busy,
the disk full or the file broken raises StateBusy, StateFull or StateBroken
(agent/durable/file/state_errors.py), so callers never need sqlite3; a write that fails for
space also marks `health` full (agent/durable/file/storage_health.py).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from agent.durable.file.state_errors import StateError, translated
from agent.durable.file.storage_health import StorageHealth
from agent.home import PRIVATE_DIR_MODE, create_private_file
from tools.sqlite_thread import SQLiteThread

T = TypeVar("T")

LOCK_WAIT_S = 10.0  # how long opening waits for another process's lock before saying so
BUSY_TIMEOUT_MS = 5000  # each statement once open (the chats' queues retry after that)
HEADER = b"SQLite format 3\x00"
Transaction = sqlite3.Connection  # what a caller's change is given, inside read or write
Migrate = Callable[[Transaction], None]


class StateDBUnusable(StateError):
    """state.db cannot be used as it is: `str()` is the one line the person reads."""

    def __init__(
        self, path: Path | str, problem: str, advice: str | None = None, *, store: str = "state.db"
    ) -> None:
        self.path, self.problem = path, problem
        self.advice = advice or restore_advice(Path(path))
        super().__init__(f"{store} error: {path}: {problem}; {self.advice}")


def restore_advice(path: Path) -> str:
    return (
        f"run `agent state check`, then restore a backup from {path.parent / 'backups'} or "
        "move the file aside to start afresh"
    )


class StateDB:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread: SQLiteThread | None = None  # the connection, once open
        self.health = StorageHealth(path.parent, probe=self._probe)

    async def open(
        self, *schemas: str, migrate: Migrate | None = None, wait_s: float = LOCK_WAIT_S
    ) -> StateDB:
        """Every chat and memory is in here: the file is made 0600 before SQLite opens it,
        and SQLite gives its -wal and -shm the same mode. `migrate` brings an older file up
        to date (or refuses it) before `schemas` run. StateDBUnusable when it cannot be used."""
        connect = partial(_connect, self.path, schemas, migrate, wait_s)
        self._thread = await SQLiteThread(connect, name="state.db").open()
        return self

    async def close(self) -> None:
        """Close once what was asked before has run."""
        await self.health.close()
        if self._thread is not None:
            thread, self._thread = self._thread, None
            await thread.close()

    async def read(self, fn: Callable[[Transaction], T]) -> T:
        """`fn(connection)` on the database's thread: any number of queries, one trip."""
        try:
            return await self._open().read(fn)
        except Exception as exc:
            _raise_translated(exc)
            raise

    async def write(self, fn: Callable[[Transaction], T]) -> T:
        """`fn(connection)` inside one transaction on the database's thread: everything it
        writes commits together, or (when it raises) not at all. The transaction runs to its
        end even when the caller is cancelled meanwhile. A failure for space marks the disk
        full (`health`) before it is raised."""
        try:
            return await self._open().write(fn)
        except Exception as exc:
            self.health.failed(exc)
            _raise_translated(exc)
            raise

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        return await self.read(partial(_fetchall, sql, tuple(params)))

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> Any:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def _probe(self) -> None:
        """One real write of one page (the header's user_version, rewritten as it is): can
        state.db be written again?"""
        await self.write(_rewrite_version)

    def _open(self) -> SQLiteThread:
        if self._thread is None:
            raise RuntimeError("state.db is closed")
        return self._thread


def _raise_translated(exc: Exception) -> None:
    """Raise SQLite's busy, full or broken as StateBusy, StateFull or StateBroken; return
    for anything else (the caller's own exception, a bug), which the caller raises as is."""
    state_error = translated(exc)
    if state_error is not None:
        raise state_error from exc


def _connect(
    path: Path, schemas: Iterable[str], migrate: Migrate | None, wait_s: float
) -> sqlite3.Connection:
    # Only the database's thread uses it; isolation_level=None: we say where BEGIN goes.
    check_file(path, create=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        _until(time.monotonic() + wait_s, partial(_prepare, conn, schemas, migrate, wait_s))
    except sqlite3.Error as exc:
        conn.close()
        raise unusable(path, exc, wait_s) from exc
    except BaseException:
        conn.close()
        raise
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _prepare(
    conn: sqlite3.Connection, schemas: Iterable[str], migrate: Migrate | None, wait_s: float
) -> None:
    conn.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # not a database: here
    if migrate is not None:
        migrate(conn)  # before anything is written: a newer or foreign file is left alone
    row = conn.execute("PRAGMA journal_mode").fetchone()
    if not row or str(row[0]).lower() != "wal":  # kept in the file: switched once
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    for schema in schemas:
        conn.executescript(schema)
    conn.execute("BEGIN IMMEDIATE")  # another process's write lock, held: waited for here
    conn.execute("ROLLBACK")


def _until(deadline: float, fn: Callable[[], None]) -> None:
    """Run `fn`, again while another process holds a lock SQLite does not wait for itself
    (busy_timeout covers most), until `deadline`."""
    while True:
        try:
            fn()
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _busy(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in (5, 6)  # BUSY, LOCKED


def check_file(path: Path, *, create: bool = False) -> None:
    """Refuse, before SQLite sees it, what is plainly not a usable database file; `create`:
    make a missing one, empty and 0600 (SQLite takes an empty file as a new database)."""
    if path.is_dir():
        raise StateDBUnusable(path, "it is a folder, not a database file", _aside(path))
    if create:
        try:
            path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
            create_private_file(path)
        except OSError as exc:
            problem = f"it cannot be created ({exc.strerror})"
            raise StateDBUnusable(path, problem, _writable(path)) from exc
    if not path.exists():
        return
    for where in (path, path.parent):
        if _on_read_only_mount(where):
            raise StateDBUnusable(
                path,
                "it is on a read-only filesystem",
                f"mount {path.parent} read-write (or move the home to a writable disk), then "
                "start again; `agent state check` shows what it holds",
            )
        if not os.access(where, os.R_OK | os.W_OK):
            raise StateDBUnusable(path, f"{_read_only(where)} for this user", _writable(path))
    with contextlib.suppress(OSError), path.open("rb") as handle:
        head = handle.read(len(HEADER))
        if head and head != HEADER:
            raise StateDBUnusable(
                path, "it is not a SQLite database (damaged, or another kind of file)"
            )


def _on_read_only_mount(where: Path) -> bool:
    try:
        return bool(os.statvfs(where).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _read_only(where: Path) -> str:
    kind = "its folder" if where.is_dir() else "it"
    return f"{kind} is read-only" if os.access(where, os.R_OK) else f"{kind} cannot be read"


def _aside(path: Path) -> str:
    return (
        f"move it aside (mv {path} {path}.aside) and start again, or restore a backup from "
        f"{path.parent / 'backups'}"
    )


def _writable(path: Path) -> str:
    return (
        f"make {path} and its folder readable and writable by user {_user()} (or run pinclaw "
        f"as their owner), then start again; `agent state check` shows what it holds"
    )


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return str(os.geteuid())


def unusable(path: Path, exc: sqlite3.Error, waited_s: float = LOCK_WAIT_S) -> StateDBUnusable:
    """The one line for an error SQLite gave while opening `path`."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if _busy(exc):
        holder = lock_holder(path)
        who = f" ({holder})" if holder else ""
        return StateDBUnusable(
            path,
            f"it is locked by another process{who} and stayed locked for {waited_s:g} s",
            "stop that process (another pinclaw, or a sqlite3 shell left open) and start "
            "again; `agent state check` shows the file",
        )
    if code == 26:  # NOTADB
        return StateDBUnusable(
            path, "it is not a SQLite database (damaged, or another kind of file)"
        )
    if code == 11:  # CORRUPT
        return StateDBUnusable(path, f"it is damaged ({exc})")
    if code in (8, 14):  # READONLY, CANTOPEN
        if _on_read_only_mount(path.parent):
            return StateDBUnusable(path, "it is on a read-only filesystem", _writable(path))
        if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            return StateDBUnusable(path, f"it is read-only ({exc})", _writable(path))
        return StateDBUnusable(path, f"it cannot be opened ({exc})", _writable(path))
    if code == 13:  # FULL
        return StateDBUnusable(
            path,
            "the disk is full",
            f"free some space on the disk of {path.parent}, then start again",
        )
    return StateDBUnusable(path, f"SQLite cannot use it ({exc})")


def lock_holder(path: Path) -> str:
    """Which process has `path` open, by /proc (Linux; '' elsewhere or when none is seen)."""
    proc = Path("/proc")
    wanted = {str(path.resolve()), f"{path.resolve()}-wal", f"{path.resolve()}-shm"}
    found: list[str] = []
    with contextlib.suppress(OSError):
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if any(os.readlink(fd) in wanted for fd in (entry / "fd").iterdir()):
                    name = (entry / "comm").read_text().strip()
                    found.append(f"pid {entry.name}: {name}")
    return ", ".join(found[:3])


def _rewrite_version(conn: sqlite3.Connection) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.execute(f"PRAGMA user_version = {version}")


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The id an `INSERT … RETURNING id` gave its row (both stores read it so)."""
    return int(cursor.fetchall()[0][0])


def _fetchall(sql: str, params: tuple[Any, ...], conn: sqlite3.Connection) -> list[Any]:
    return conn.execute(sql, params).fetchall()
