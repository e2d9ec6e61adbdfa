"""What `agent state check` and `agent doctor` read of state.db, each with a connection of its
own that writes nothing, so both are safe beside a running daemon: SQLite's integrity check,
the file's marks (application id, schema version), the rows of each table, and what a stopped
daemon left queued for its next start (`queued`, on either store's connection). SQLite's
failures come out as StateError (agent/durable/file/state_errors.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from agent.durable.file.backups import LOCK_WAIT_S, open_connection
from agent.durable.file.state_errors import StateError, state_error
from agent.durable.inbox import count_waiting
from agent.durable.outbox import count_replies, part_fates


@dataclass
class Checked:
    """What `agent state check` found, as far as SQLite could read: a field is None when
    `error` stopped the check before it."""

    integrity: list[str] | None = None  # SQLite's integrity_check: ["ok"] when whole
    application_id: int | None = None
    version: int | None = None
    rows: list[tuple[str, int]] | None = None  # per table, full-text shadow tables left out
    error: StateError | None = None

    @property
    def whole(self) -> bool:
        return self.error is None and self.integrity == ["ok"]


def check(path: Path, wait_s: float = LOCK_WAIT_S) -> Checked:
    """Read `path` through, never writing (a read-only disk is read as it lies)."""
    found = Checked()
    try:
        with open_connection(path, wait_s, read_only=True) as conn:
            found.integrity = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
            found.application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
            found.version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            found.rows = _rows(conn)
    except sqlite3.Error as exc:
        found.error = state_error(exc)
    return found


def _rows(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    tables = conn.execute(
        "SELECT name, sql LIKE 'CREATE VIRTUAL%' FROM sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    virtual = tuple(f"{name}_" for name, is_virtual in tables if is_virtual)
    counts = []
    for name, _ in tables:
        if not name.startswith(virtual) or not virtual:
            (count,) = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()
            counts.append((str(name), int(count)))
    return counts


def schema_version(path: Path, wait_s: float = 2.0) -> int:
    """The file's `PRAGMA user_version` (a file `diagnose` found usable); StateError when
    SQLite cannot read it."""
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=wait_s)) as db:
            return int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise state_error(exc) from exc


@dataclass(frozen=True)
class Queued:
    """What a stopped daemon left for its next start."""

    waiting: int  # messages waiting for an answer
    replies: int  # replies waiting to be sent
    expired: int  # replies never delivered
    fates: dict[str, int] = field(default_factory=dict)  # parts "refused", "unknown"


def queued(conn: sqlite3.Connection) -> Queued:
    """On a connection of the caller's (`agent doctor` reads through read_state, beside a
    running daemon, on either store)."""
    waiting = count_waiting(conn)
    replies, expired = count_replies(conn, "pending"), count_replies(conn, "expired")
    return Queued(waiting, replies, expired, part_fates(conn))
