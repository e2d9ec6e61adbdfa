"""The outbox: every reply, stored before it is sent, split into the parts the platform
takes, with how many parts have gone out. A restart resumes at the first unsent part; a
reply that cannot be delivered by its deadline is marked "expired" (and its answer leaves
the chat's history, see sessions.py)."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass

from agent.turns.store import StateDB
from channels.base import ChatRef, OutgoingMedia, OutgoingPart

SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    chat_key TEXT NOT NULL,
    chat TEXT NOT NULL,
    inbox_id INTEGER,
    parts TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    deliver_by REAL NOT NULL,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS outbox_by_status ON outbox (status, chat_key, id);
CREATE INDEX IF NOT EXISTS outbox_by_inbox ON outbox (inbox_id);
"""


@dataclass(frozen=True)
class Outgoing:
    id: int
    chat: ChatRef
    inbox_id: int | None
    parts: list[OutgoingPart]
    sent: int
    deliver_by: float


def _encode_parts(parts: list[OutgoingPart]) -> str:
    return json.dumps([asdict(part) for part in parts], ensure_ascii=False)


def _decode_parts(text: str) -> list[OutgoingPart]:
    parts = []
    for item in json.loads(text):
        media = OutgoingMedia(**item["media"]) if item.get("media") else None
        parts.append(OutgoingPart(text=item["text"], media=media, reply_to=item["reply_to"]))
    return parts


class Outbox:
    def __init__(self, db: StateDB) -> None:
        self._db = db

    def insert(
        self,
        conn: sqlite3.Connection,
        chat: ChatRef,
        parts: list[OutgoingPart],
        *,
        inbox_id: int | None,
        deliver_within_s: float,
    ) -> int:
        """Queue a reply inside the caller's transaction (`StateDB.write`)."""
        now = time.time()
        cursor = conn.execute(
            "INSERT INTO outbox (channel, chat_key, chat, inbox_id, parts, created_at,"
            " deliver_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                chat.channel,
                chat.key,
                json.dumps(asdict(chat)),
                inbox_id,
                _encode_parts(parts),
                now,
                now + deliver_within_s,
            ),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    async def chats_waiting(self, channel: str) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT chat_key FROM outbox WHERE status = 'pending' AND channel = ? "
            "GROUP BY chat_key ORDER BY MIN(id)",
            (channel,),
        )
        return [key for (key,) in rows]

    async def oldest(self, chat_key: str) -> Outgoing | None:
        return await self._db.read(lambda conn: _oldest(conn, chat_key))

    async def mark_sent(
        self, outgoing_id: int, sent: int, *, done: bool, next_of: str | None = None
    ) -> Outgoing | None:
        """`sent` parts have gone out; with `done`, the whole reply has. With `next_of` (a
        chat key), that chat's oldest pending reply is read in the same trip and returned:
        the courier's next step needs no trip of its own."""

        def mark(conn: sqlite3.Connection) -> Outgoing | None:
            conn.execute(
                "UPDATE outbox SET sent = ?, status = ? WHERE id = ?",
                (sent, "sent" if done else "pending", outgoing_id),
            )
            return None if next_of is None else _oldest(conn, next_of)

        return await self._db.write(mark)

    async def note_failure(self, outgoing_id: int, error: str, *, expired: bool) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, status = ?"
                " WHERE id = ?",
                (error[:500], "expired" if expired else "pending", outgoing_id),
            )
        )

    async def waiting(self) -> int:
        row = await self._db.fetchone("SELECT COUNT(*) FROM outbox WHERE status = 'pending'")
        return int(row[0]) if row else 0


def _oldest(conn: sqlite3.Connection, chat_key: str) -> Outgoing | None:
    row = conn.execute(
        "SELECT id, chat, inbox_id, parts, sent, deliver_by FROM outbox"
        " WHERE status = 'pending' AND chat_key = ? ORDER BY id LIMIT 1",
        (chat_key,),
    ).fetchone()
    if row is None:
        return None
    chat = ChatRef(**json.loads(row[1]))
    return Outgoing(row[0], chat, row[2], _decode_parts(row[3]), row[4], row[5])
