"""The boards' tables in state.db: the actuation log, the outputs' max_on_s deadlines and
the kept readings of watched pins (tools/board/oversight/records.py says what each row is).

`StateRecords` is the `HardwareRecords` the tools are handed (agent/app.py); `agent hardware
log` runs `select_log` through agent/durable/store.py's read_state, beside a running
daemon. The log keeps its newest LOG_KEPT rows; readings are bounded by the Keeper (a week
by default) and by READINGS_KEPT per pin.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from agent.durable.file.state_db import StateDB
from tools.board.oversight.records import Actuation, Deadline

SCHEMA = """
CREATE TABLE IF NOT EXISTS actuations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    board TEXT NOT NULL,
    pin TEXT NOT NULL,
    value TEXT NOT NULL,
    state TEXT NOT NULL,
    source TEXT NOT NULL,
    who TEXT NOT NULL DEFAULT '',
    chat_key TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS actuations_by_board ON actuations (board, at);
CREATE TABLE IF NOT EXISTS output_deadlines (
    board TEXT NOT NULL,
    pin TEXT NOT NULL,
    label TEXT NOT NULL,
    due REAL NOT NULL,
    chat_key TEXT NOT NULL DEFAULT '',
    set_at REAL NOT NULL,
    PRIMARY KEY (board, pin)
);
CREATE TABLE IF NOT EXISTS pin_readings (
    board TEXT NOT NULL,
    pin TEXT NOT NULL,
    at REAL NOT NULL,
    value REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS pin_readings_by_pin ON pin_readings (board, pin, at);
"""
FIRST_COLUMNS = {
    "actuations": frozenset({"id", "at", "board", "pin", "value", "state", "source"}),
    "output_deadlines": frozenset({"board", "pin", "label", "due", "set_at"}),
    "pin_readings": frozenset({"board", "pin", "at", "value"}),
}
LOG_KEPT = 100_000
READINGS_KEPT = 200_000  # per pin: a week at one reading every 3 s
_LOG_COLUMNS = "at, board, pin, value, state, source, who, chat_key"


class StateRecords:
    """The actuation log, the deadlines and the kept readings, through StateDB."""

    def __init__(self, db: StateDB) -> None:
        self._db = db

    async def log(self, entry: Actuation) -> None:
        def add(conn: sqlite3.Connection) -> None:
            (row_id,) = conn.execute(
                f"INSERT INTO actuations ({_LOG_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " RETURNING id",
                _row(entry),
            ).fetchall()[0]
            if row_id % 1000 == 0:  # now and then, not each time
                conn.execute("DELETE FROM actuations WHERE id <= ?", (row_id - LOG_KEPT,))

        await self._db.write(add)

    async def actuations(
        self,
        *,
        board: str | None = None,
        pin: str | None = None,
        since: float | None = None,
        limit: int = 50,
    ) -> list[Actuation]:
        return await self._db.read(lambda conn: select_log(conn, board, since, limit, pin))

    async def set_deadline(self, deadline: Deadline) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "INSERT INTO output_deadlines (board, pin, label, due, chat_key, set_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (board, pin) DO UPDATE SET"
                " label = excluded.label, due = excluded.due, chat_key = excluded.chat_key,"
                " set_at = excluded.set_at",
                _deadline_row(deadline),
            )
        )

    async def clear_deadline(self, board: str, pin: str) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "DELETE FROM output_deadlines WHERE board = ? AND pin = ?", (board, pin)
            )
        )

    async def deadlines(self) -> list[Deadline]:
        rows = await self._db.fetchall(
            "SELECT board, pin, label, due, chat_key, set_at FROM output_deadlines ORDER BY due"
        )
        return [Deadline(*row) for row in rows]

    async def keep_readings(
        self, board: str, pin: str, rows: Sequence[tuple[float, float]], forget_before: float
    ) -> None:
        def keep(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO pin_readings (board, pin, at, value) VALUES (?, ?, ?, ?)",
                [(board, pin, at, value) for at, value in rows],
            )
            conn.execute(
                "DELETE FROM pin_readings WHERE board = ? AND pin = ? AND at < ?",
                (board, pin, forget_before),
            )
            conn.execute(
                "DELETE FROM pin_readings WHERE board = ? AND pin = ? AND at < (SELECT at"
                " FROM pin_readings WHERE board = ? AND pin = ? ORDER BY at DESC LIMIT 1 OFFSET ?)",
                (board, pin, board, pin, READINGS_KEPT - 1),
            )

        await self._db.write(keep)

    async def readings(self, board: str, pin: str, since: float) -> list[tuple[float, float]]:
        rows = await self._db.fetchall(
            "SELECT at, value FROM pin_readings WHERE board = ? AND pin = ? AND at >= ?"
            " ORDER BY at",
            (board, pin, since),
        )
        return [(float(at), float(value)) for at, value in rows]


def _row(entry: Actuation) -> tuple[object, ...]:
    return (
        entry.at,
        entry.board,
        entry.pin,
        entry.value,
        entry.state,
        entry.source,
        entry.who,
        entry.chat,
    )


def _deadline_row(deadline: Deadline) -> tuple[object, ...]:
    d = deadline
    return (d.board, d.pin, d.label, d.due, d.chat, d.set_at)


def select_log(
    conn: sqlite3.Connection,
    board: str | None,
    since: float | None,
    limit: int,
    pin: str | None = None,
) -> list[Actuation]:
    """The newest `limit` rows, newest first, of `board` (None: every board) and `pin` (its
    label) since `since`."""
    where: list[str] = ["1 = 1"]  # PostgreSQL wants a boolean
    params: list[object] = []
    if board is not None:
        where.append("board = ?")
        params.append(board)
    if pin is not None:
        where.append("pin = ?")
        params.append(pin)
    if since is not None:
        where.append("at >= ?")
        params.append(since)
    rows = conn.execute(
        f"SELECT {_LOG_COLUMNS} FROM actuations WHERE {' AND '.join(where)}"
        " ORDER BY at DESC, id DESC LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [Actuation(*row) for row in rows]
