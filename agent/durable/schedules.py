"""The schedules table in state.db: what is to run when, in which chat, set by whom.

A row keeps the chat it was made in and the person who set it, so its turn runs later as
theirs (their allow-list entry, their memories, the chat's approvals). `next_due` is UTC
epoch seconds, NULL once nothing more is due; a pin watch (kind "pin", its pin and
condition as JSON in `spec`) has none: the board's readings, not a clock, fire it
(agent/proactive/pin_watcher.py). The daemon's scheduler reads the rows again
each time it wakes, so `agent schedules cancel` (another process, writing the file
directly) takes effect without telling it; a run is recorded only while its row is still
active (see `advance`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any, Literal

from agent.durable.file.state_db import StateDB, inserted_id
from channels.base import ChatRef, IncomingMessage
from tools.proactive.schedule_tools import ScheduleEntry

ScheduleKind = Literal["once", "cron", "heartbeat", "pin"]  # "pin": a pin watch
Status = Literal["active", "done", "cancelled", "skipped"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    task TEXT NOT NULL,
    channel TEXT NOT NULL,
    chat_key TEXT NOT NULL,
    chat TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    sender_name TEXT NOT NULL DEFAULT '',
    sender_username TEXT NOT NULL DEFAULT '',
    in_group INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    next_due REAL,
    last_run REAL,
    runs INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'active',
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (status, next_due);
CREATE INDEX IF NOT EXISTS schedules_by_chat ON schedules (chat_key, status);
"""
_COLUMNS = (
    "id, kind, spec, task, chat, sender_id, sender_name, sender_username, in_group,"
    " created_at, next_due, last_run, runs, status, note"
)
ENDED_KEPT = 20  # ended schedules listed per chat, newest first


@dataclass(frozen=True)
class Schedule:
    id: int
    kind: ScheduleKind
    spec: str  # ISO time, cron expression, "every N minutes", or a pin watch's JSON
    task: str
    chat: ChatRef
    sender_id: str
    sender_name: str
    sender_username: str
    in_group: bool
    created_at: float
    next_due: float | None
    last_run: float | None
    runs: int
    status: Status
    note: str

    @property
    def set_by(self) -> str:
        name = self.sender_name or self.sender_id
        return f"{name} (@{self.sender_username})" if self.sender_username else name

    def entry(self, where: str = "") -> ScheduleEntry:
        return ScheduleEntry(
            self.id,
            self.kind,
            self.spec,
            self.task,
            self.status,
            self.next_due,
            self.chat.key,
            self.set_by,
            where,
            self.note,
        )

    def message(self, message_id: str) -> IncomingMessage:
        """One run of the row as a message of its chat, from the person who set it."""
        return IncomingMessage(
            chat=self.chat,
            sender_id=self.sender_id,
            sender_name=self.sender_name,
            sender_username=self.sender_username,
            text=self.task,
            is_group=self.in_group,
            message_id=message_id,
        )


@dataclass(frozen=True)
class NewSchedule:
    kind: ScheduleKind
    spec: str
    task: str
    chat: ChatRef
    sender_id: str
    next_due: float | None  # None for a pin watch
    sender_name: str = ""
    sender_username: str = ""
    in_group: bool = False


def _row(row: Any) -> Schedule:
    values = list(row)
    values[4] = ChatRef(**json.loads(values[4]))
    values[8] = bool(values[8])
    return Schedule(*values)


class Schedules:
    def __init__(self, db: StateDB) -> None:
        self._db = db

    @property
    def db(self) -> StateDB:
        return self._db

    async def add(self, new: NewSchedule) -> Schedule:
        def insert(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO schedules (kind, spec, task, channel, chat_key, chat, sender_id,"
                " sender_name, sender_username, in_group, created_at, next_due)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    new.kind,
                    new.spec,
                    new.task,
                    new.chat.channel,
                    new.chat.key,
                    json.dumps(asdict(new.chat)),
                    new.sender_id,
                    new.sender_name,
                    new.sender_username,
                    int(new.in_group),
                    time.time(),
                    new.next_due,
                ),
            )
            return inserted_id(cursor)

        schedule_id = await self._db.write(insert)
        assert schedule_id is not None
        found = await self.get(schedule_id)
        assert found is not None
        return found

    async def get(self, schedule_id: int) -> Schedule | None:
        if not -(2**63) <= schedule_id < 2**63:  # SQL's integers (SQLite's, BIGINT): no such row
            return None
        row = await self._db.fetchone(
            f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)
        )
        return _row(row) if row else None

    async def active(
        self, channels: Collection[str] | None = None, kind: ScheduleKind | None = None
    ) -> list[Schedule]:
        """Active schedules (of these channels, of this kind), the soonest due first."""
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' AND next_due IS NOT NULL"
            " ORDER BY next_due, id"
        )
        found = [_row(row) for row in rows]
        return [
            s
            for s in found
            if (channels is None or s.chat.channel in channels) and (kind is None or s.kind == kind)
        ]

    async def listing(
        self, chat_key: str | None = None, *, watches: bool | None = None
    ) -> list[Schedule]:
        """A chat's schedules (None: every chat's): the active ones, soonest first, then the
        newest ended ones. `watches`: only pin watches (True), none (False), both (None)."""
        where, params = ("", ()) if chat_key is None else (" AND chat_key = ?", (chat_key,))
        if watches is not None:
            where += " AND kind = 'pin'" if watches else " AND kind != 'pin'"
        active = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active'{where}"
            " ORDER BY next_due, id",
            params,
        )
        ended = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules WHERE status != 'active'{where}"
            f" ORDER BY id DESC LIMIT {ENDED_KEPT}",
            params,
        )
        return [_row(row) for row in [*active, *ended]]

    async def count_active(self, chat_key: str, *, watches: bool = False) -> int:
        """A chat's active schedules (the heartbeat aside), or its active pin watches."""
        kinds = "kind = 'pin'" if watches else "kind NOT IN ('heartbeat', 'pin')"
        row = await self._db.fetchone(
            f"SELECT COUNT(*) FROM schedules WHERE status = 'active' AND chat_key = ? AND {kinds}",
            (chat_key,),
        )
        return int(row[0]) if row else 0

    async def cancel(self, schedule_id: int, note: str = "") -> bool:
        """Cancel it if it is still active; False when it was not."""
        cursor = await self._db.write(
            lambda conn: conn.execute(
                "UPDATE schedules SET status = 'cancelled', next_due = NULL, note = ?"
                " WHERE id = ? AND status = 'active'",
                (note, schedule_id),
            )
        )
        return cursor.rowcount == 1

    def advance(
        self,
        conn: sqlite3.Connection,
        schedule: Schedule,
        *,
        next_due: float | None,
        ran_at: float | None,
        note: str = "",
        status: Status | None = None,
    ) -> bool:
        """Inside the caller's transaction: record a run (`ran_at`) or a skip, and when it is
        due next (None: never; a `once` is then done, or skipped when it did not run). False,
        and nothing changed, when the row was cancelled or advanced meanwhile."""
        if status is None:
            finished: Status = "done" if ran_at is not None else "skipped"
            status = "active" if next_due is not None else finished
        cursor = conn.execute(
            "UPDATE schedules SET next_due = ?, status = ?, note = ?,"
            " last_run = COALESCE(?, last_run), runs = runs + ?"
            " WHERE id = ? AND status = 'active' AND next_due IS ?",
            (
                next_due,
                status,
                note,
                ran_at,
                int(ran_at is not None),
                schedule.id,
                schedule.next_due,
            ),
        )
        return cursor.rowcount == 1

    async def watches(self, channels: Collection[str]) -> list[Schedule]:
        """The active pin watches of these channels, oldest first."""
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' AND kind = 'pin' ORDER BY id"
        )
        return [s for s in map(_row, rows) if s.chat.channel in channels]

    async def move(self, schedule: Schedule, next_due: float) -> bool:
        """Set when it is due next (the clock stepped back); False when it changed
        meanwhile."""
        cursor = await self._db.write(
            lambda conn: conn.execute(
                "UPDATE schedules SET next_due = ? WHERE id = ? AND status = 'active'"
                " AND next_due IS ?",
                (next_due, schedule.id, schedule.next_due),
            )
        )
        return cursor.rowcount == 1

    async def update_heartbeat(self, schedule_id: int, spec: str, next_due: float) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE schedules SET spec = ?, next_due = ? WHERE id = ?",
                (spec, next_due, schedule_id),
            )
        )
