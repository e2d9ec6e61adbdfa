"""The inbox: every message a chat sends, stored before the channel acknowledges it.

A message stays "pending" until its reply is in the outbox (one transaction marks it done),
so a crash, a restart or a provider outage leaves it to be answered later, never lost. One
turn may answer several rows (a burst, messages collected or steered in: the chat's busy
mode, agent/runtime/queues/busy.py): each says which turn took it (`taken_by`, the id of the
row that turn began with), in the same transaction. The
platform's message id makes a re-delivered message a no-op. Rows are kept after they are
done: they are the record of what was asked and when.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from agent.durable.file.state_db import StateDB
from agent.durable.triggers import Trigger, decode_trigger, encode_trigger
from channels.base import Attachment, ChatRef, IncomingMessage, RemoteFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_key TEXT NOT NULL,
    message_id TEXT NOT NULL,
    message TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL DEFAULT 0,
    failing_since REAL,
    notified INTEGER NOT NULL DEFAULT 0,
    received_at REAL NOT NULL,
    done_at REAL,
    trigger TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS inbox_once ON inbox (chat_key, message_id)
    WHERE message_id != '';
CREATE INDEX IF NOT EXISTS inbox_by_status ON inbox (status, chat_key, id);
"""
# Columns added after the first release; an older state.db gains them on open.
MIGRATIONS = {
    # What started a turn nobody typed (agent/durable/triggers.py); '' for a person's message.
    "trigger": "ALTER TABLE inbox ADD COLUMN trigger TEXT NOT NULL DEFAULT ''",
}
TAKEN_BY = "ALTER TABLE inbox ADD COLUMN taken_by INTEGER"  # schema version 8


@dataclass(frozen=True)
class Pending:
    """A message waiting for its turn, with what earlier attempts left behind."""

    id: int
    message: IncomingMessage
    attempts: int
    next_attempt_at: float
    failing_since: float | None
    notified: bool
    trigger: Trigger | None = None  # a schedule or the heartbeat, not a person
    received_at: float = 0.0
    folded: tuple[Pending, ...] = ()  # later rows this turn answers too (one burst)

    @property
    def ids(self) -> tuple[int, ...]:
        """Every row the turn answers, its own first."""
        return (self.id, *(row.id for row in self.folded))

    @property
    def messages(self) -> tuple[IncomingMessage, ...]:
        return (self.message, *(row.message for row in self.folded))


def encode(msg: IncomingMessage) -> str:
    data = asdict(msg)
    data["attachments"] = [
        {"kind": item.kind, "path": str(item.path), "note": item.note} for item in msg.attachments
    ]
    return json.dumps(data, ensure_ascii=False)


def decode(text: str) -> IncomingMessage:
    """A stored message; keys an earlier pinclaw kept and this one no longer has (such as
    `mentions_bot`) are left out, so its pending rows still load."""
    known = {item.name for item in fields(IncomingMessage)}
    data: dict[str, Any] = {k: v for k, v in json.loads(text).items() if k in known}
    data["chat"] = ChatRef(**data["chat"])
    data["attachments"] = tuple(
        Attachment(item["kind"], Path(item["path"]), item["note"]) for item in data["attachments"]
    )
    data["files"] = tuple(RemoteFile(**item) for item in data.get("files", ()))
    return IncomingMessage(**data)


class AnsweredElsewhere(Exception):
    """The message's turn was committed already — by another process sharing the store whose
    claim on the chat this one's outlived — so this turn's record and reply are dropped."""


class Inbox:
    def __init__(self, db: StateDB) -> None:
        self._db = db

    @classmethod
    async def open(cls, db: StateDB) -> Inbox:
        """The inbox on an open state.db (its SCHEMA created), older files migrated."""
        await db.write(_migrate)
        return cls(db)

    async def add(self, msg: IncomingMessage, *, status: str = "pending") -> int | None:
        """Store the message, committed to disk; None when it was stored before."""
        return await self._db.write(lambda conn: self.insert(conn, msg, status=status))

    def insert(
        self,
        conn: sqlite3.Connection,
        msg: IncomingMessage,
        *,
        status: str = "pending",
        trigger: Trigger | None = None,
    ) -> int | None:
        """Store the message inside the caller's transaction (`StateDB.write`)."""
        cursor = conn.execute(
            "INSERT INTO inbox (channel, chat_key, message_id, message, status, received_at,"
            " done_at, trigger) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING id",
            (
                msg.chat.channel,
                msg.chat.key,
                msg.message_id,
                encode(msg),
                status,
                time.time(),
                None if status == "pending" else time.time(),
                encode_trigger(trigger),
            ),
        )
        rows = cursor.fetchall()
        return int(rows[0][0]) if rows else None

    async def chats_waiting(self, channel: str) -> list[str]:
        """Chats with pending messages, the one waiting longest first."""
        rows = await self._db.fetchall(
            "SELECT chat_key FROM inbox WHERE status = 'pending' AND channel = ? "
            "GROUP BY chat_key ORDER BY MIN(id)",
            (channel,),
        )
        return [key for (key,) in rows]

    async def oldest(self, chat_key: str) -> Pending | None:
        found = await self.pending(chat_key, limit=1)
        return found[0] if found else None

    async def pending(self, chat_key: str, *, after: int = 0, limit: int = 50) -> list[Pending]:
        """The chat's pending rows past id `after`, oldest first."""
        rows = await self._db.fetchall(
            "SELECT id, message, attempts, next_attempt_at, failing_since, notified, trigger,"
            " received_at FROM inbox WHERE status = 'pending' AND chat_key = ? AND id > ?"
            " ORDER BY id LIMIT ?",
            (chat_key, after, limit),
        )
        return [
            Pending(
                row[0],
                decode(row[1]),
                row[2],
                row[3],
                row[4],
                bool(row[5]),
                decode_trigger(row[6]),
                row[7],
            )
            for row in rows
        ]

    async def waiting(self, chat_key: str | None = None) -> int:
        return await self._db.read(lambda conn: count_waiting(conn, chat_key))

    async def last_private_chat(self, channel: str, user_id: str) -> str | None:
        """The key of the private chat `user_id` last wrote in on `channel` (their own
        message, not a trigger's); None before they have."""
        row = await self._db.fetchone(
            "SELECT chat_key FROM inbox WHERE channel = ? AND trigger = ''"
            " AND json_extract(message, '$.sender_id') = ?"
            " AND json_extract(message, '$.is_group') = 0 ORDER BY id DESC LIMIT 1",
            (channel, user_id),
        )
        return str(row[0]) if row else None

    async def senders(self, channel: str, chat_id: str) -> list[tuple[str, str]]:
        """Everyone who has written in chat `chat_id` of `channel` (triggers aside): their
        id and username ("" when none)."""
        rows = await self._db.fetchall(
            "SELECT DISTINCT json_extract(message, '$.sender_id'),"
            " json_extract(message, '$.sender_username') FROM inbox"
            " WHERE channel = ? AND json_extract(message, '$.chat.chat_id') = ? AND trigger = ''",
            (channel, chat_id),
        )
        return [(str(sender), str(username or "")) for sender, username in rows]

    async def keep_fetched(self, inbox_id: int, msg: IncomingMessage) -> None:
        """A pending row's message as its files were fetched (saved attachments and notes, no
        `files` left): a turn run again reuses them (agent/runtime/attachments.py)."""
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE inbox SET message = ? WHERE id = ? AND status = 'pending'",
                (encode(msg), inbox_id),
            )
        )

    def finish(
        self, conn: sqlite3.Connection, inbox_id: int, status: str, *, taken_by: int | None = None
    ) -> None:
        """Mark the message answered ("done") or given up on ("failed"), inside the
        transaction that stored its reply; `taken_by`: the row whose turn answered it.
        AnsweredElsewhere when it is no longer pending: the transaction must not commit."""
        cursor = conn.execute(
            "UPDATE inbox SET status = ?, done_at = ?, taken_by = ? WHERE id = ?"
            " AND status = 'pending'",
            (status, time.time(), inbox_id if taken_by is None else taken_by, inbox_id),
        )
        if cursor.rowcount != 1:
            raise AnsweredElsewhere(f"inbox row {inbox_id} was answered by another turn")

    async def defer(
        self, inbox_id: int, *, retry_at: float, failing_since: float, notified: bool
    ) -> None:
        """The turn could not run now (no model answered): try again at `retry_at`."""
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE inbox SET attempts = attempts + 1, next_attempt_at = ?,"
                " failing_since = ?, notified = ? WHERE id = ?",
                (retry_at, failing_since, int(notified), inbox_id),
            )
        )


def count_waiting(conn: sqlite3.Connection, chat_key: str | None = None) -> int:
    """Messages waiting for an answer, in `chat_key` or in every chat; on any connection
    (`agent doctor` reads with one of its own)."""
    if chat_key is None:
        row = conn.execute("SELECT COUNT(*) FROM inbox WHERE status = 'pending'").fetchone()
    else:
        row = conn.execute(
            "SELECT COUNT(*) FROM inbox WHERE status = 'pending' AND chat_key = ?", (chat_key,)
        ).fetchone()
    return int(row[0]) if row else 0


def _migrate(conn: sqlite3.Connection) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(inbox)")}
    for column, sql in MIGRATIONS.items():
        if column not in columns:
            conn.execute(sql)
