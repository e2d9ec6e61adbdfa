"""The outbox: every reply, stored before it is sent, split into the parts the platform
takes, with how many parts have gone out. A restart resumes at the first unsent part; a
reply that cannot be delivered by its deadline is marked "expired" (and its answer leaves
the chat's history, see sessions.py).

Each part's fate is in `outbox_parts`: before a part is sent its attempt is committed
("sending"); after, what the platform said: "sent" (with the platform's message id),
"refused" (with the reason: the user blocked the bot, the chat is gone), or "unknown" (sent
when pinclaw stopped or timed out, and the platform cannot tell: possibly lost). An attempt
the platform answered with a plain failure is removed: that part was not delivered. So after
a crash, a part still "sending" is one that may have gone out, and is never resent blindly.
A voice note's audio and a document's text are kept only until the reply is done (or
expired): they are there for a restart to send, and emptied then, not kept for good.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from agent.durable.file.state_db import StateDB, inserted_id
from agent.durable.file.storage_health import StorageHealth
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
# Each part's attempt and fate (state.db's schema version 2; SCHEMA above is version 1's).
PARTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox_parts (
    outbox_id INTEGER NOT NULL,
    part INTEGER NOT NULL,
    status TEXT NOT NULL,
    message_id TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    attempted_at REAL NOT NULL,
    sends INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (outbox_id, part)
);
CREATE INDEX IF NOT EXISTS outbox_parts_by_status ON outbox_parts (status);
"""
PartStatus = Literal["sent", "refused", "unknown", "unsent"]


@dataclass(frozen=True)
class Outgoing:
    id: int
    chat: ChatRef
    inbox_id: int | None
    parts: list[OutgoingPart]
    sent: int
    deliver_by: float
    created_at: float = 0.0
    # Part `sent` was being sent when an earlier run stopped (its attempt, no outcome): when.
    attempted_at: float | None = None


@dataclass(frozen=True)
class PartOutcome:
    """What became of one attempt at a part; written after the send, first thing (and again
    until it is written: the courier keeps it in memory, never sending the part again)."""

    outgoing_id: int
    part: int
    status: PartStatus  # "unsent": the platform answered that it did not take it
    last: bool = False  # the reply's last part: the reply is done (unless "unsent")
    message_id: str = ""
    reason: str = ""
    expired: bool = False  # "unsent" past the reply's deadline: the reply is given up

    @property
    def _key(self) -> tuple[int, int]:
        return self.outgoing_id, self.part

    def apply(self, conn: sqlite3.Connection) -> None:
        if self.status == "unsent":
            conn.execute(
                "DELETE FROM outbox_parts WHERE outbox_id = ? AND part = ? AND status = 'sending'",
                (self.outgoing_id, self.part),
            )
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, status = ?"
                " WHERE id = ?",
                (self.reason[:500], "expired" if self.expired else "pending", self.outgoing_id),
            )
            if self.expired:
                _let_go_of_payloads(conn, self.outgoing_id)
            return
        if self.part >= 0:  # -1: a reply with no parts, done
            self._keep(conn)
        done = "pending"
        if self.last:
            refused = conn.execute(
                "SELECT 1 FROM outbox_parts WHERE outbox_id = ? AND status = 'refused'",
                (self.outgoing_id,),
            ).fetchone()
            done = "refused" if refused else "sent"
        conn.execute(
            "UPDATE outbox SET sent = ?, status = ?,"
            " last_error = CASE WHEN ? = '' THEN last_error ELSE ? END WHERE id = ?",
            (self.part + 1, done, self.reason, self.reason[:500], self.outgoing_id),
        )
        if self.last:
            _let_go_of_payloads(conn, self.outgoing_id)

    def _keep(self, conn: sqlite3.Connection) -> None:
        """The part's outcome, over its attempt (or in its place: a part never attempted)."""
        conn.execute(
            "INSERT INTO outbox_parts (outbox_id, part, status, message_id, reason, attempted_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (outbox_id, part) DO UPDATE SET"
            " status = excluded.status, message_id = excluded.message_id,"
            " reason = excluded.reason",
            (*self._key, self.status, self.message_id, self.reason[:500], time.time()),
        )


def _let_go_of_payloads(conn: sqlite3.Connection, outgoing_id: int) -> None:
    """A done reply's voice notes and documents (`spoken`, `inline`) emptied: they were kept
    only for a restart to send them, and would otherwise stay in state.db (and its backups)
    for good. The rest of each part stays, for what reads a reply's record."""
    row = conn.execute("SELECT parts FROM outbox WHERE id = ?", (outgoing_id,)).fetchone()
    if row is None:
        return
    parts, emptied = json.loads(row[0]), False
    for media in (part.get("media") for part in parts):
        if media and (media.get("spoken") or media.get("inline")):
            media["spoken"] = media["inline"] = ""
            emptied = True
    if emptied:
        conn.execute(
            "UPDATE outbox SET parts = ? WHERE id = ?",
            (json.dumps(parts, ensure_ascii=False), outgoing_id),
        )


def _encode_parts(parts: list[OutgoingPart]) -> str:
    """Every field of each part, `previews` too: a tainted reply resumed after a restart
    still goes out without link previews."""
    return json.dumps([asdict(part) for part in parts], ensure_ascii=False)


def _decode_parts(text: str) -> list[OutgoingPart]:
    """The parts as stored; a row from before `previews` was kept had every preview on."""
    parts = []
    for item in json.loads(text):
        media = OutgoingMedia(**item["media"]) if item.get("media") else None
        previews = bool(item.get("previews", True))
        parts.append(
            OutgoingPart(
                text=item["text"], media=media, reply_to=item["reply_to"], previews=previews
            )
        )
    return parts


class Outbox:
    def __init__(self, db: StateDB) -> None:
        self._db = db

    @property
    def health(self) -> StorageHealth:
        """state.db's disk: a courier waits out a full one."""
        return self._db.health

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
            " deliver_by) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
        return inserted_id(cursor)

    async def chats_waiting(self, channel: str) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT chat_key FROM outbox WHERE status = 'pending' AND channel = ? "
            "GROUP BY chat_key ORDER BY MIN(id)",
            (channel,),
        )
        return [key for (key,) in rows]

    async def oldest(self, chat_key: str) -> Outgoing | None:
        return await self._db.read(lambda conn: _oldest(conn, chat_key))

    async def attempt(self, outgoing_id: int, part: int) -> None:
        """Part `part` is about to be sent: committed before the call, so that after a crash
        it is known to have maybe gone out."""
        await self._db.write(
            lambda conn: conn.execute(
                "INSERT INTO outbox_parts (outbox_id, part, status, attempted_at)"
                " VALUES (?, ?, 'sending', ?) ON CONFLICT (outbox_id, part) DO UPDATE SET"
                " status = 'sending', attempted_at = excluded.attempted_at,"
                " sends = outbox_parts.sends + 1",
                (outgoing_id, part, time.time()),
            )
        )

    async def record(
        self, outcomes: Sequence[PartOutcome], *, next_of: str | None = None
    ) -> Outgoing | None:
        """Write the outcomes in one transaction. With `next_of` (a chat key), that chat's
        oldest pending reply is read in the same trip and returned: the courier's next step
        needs no trip of its own."""

        def write(conn: sqlite3.Connection) -> Outgoing | None:
            for outcome in outcomes:
                outcome.apply(conn)
            return None if next_of is None else _oldest(conn, next_of)

        return await self._db.write(write)

    async def waiting(self) -> int:
        return await self._db.read(lambda conn: count_replies(conn, "pending"))

    async def fate(self, outgoing_id: int) -> tuple[str, str] | None:
        """The reply's status ("pending", "sent", "refused", "expired") and its last error;
        None for no such reply."""
        row = await self._db.fetchone(
            "SELECT status, last_error FROM outbox WHERE id = ?", (outgoing_id,)
        )
        return (str(row[0]), str(row[1])) if row else None


def count_replies(conn: sqlite3.Connection, status: str) -> int:
    """Replies of `status` ("pending": waiting to be sent; "expired": never delivered); on
    any connection (`agent doctor` reads with one of its own)."""
    row = conn.execute("SELECT COUNT(*) FROM outbox WHERE status = ?", (status,)).fetchone()
    return int(row[0]) if row else 0


def part_fates(conn: sqlite3.Connection) -> dict[str, int]:
    """How many parts were refused, and how many are of unknown fate, by status; none in an
    older state.db (no outbox_parts yet)."""
    try:
        rows = conn.execute(
            "SELECT status, COUNT(*) FROM outbox_parts WHERE status IN ('refused', 'unknown')"
            " GROUP BY status"
        ).fetchall()
    except sqlite3.OperationalError:  # no outbox_parts table yet
        return {}
    return {str(status): int(count) for status, count in rows}


def _oldest(conn: sqlite3.Connection, chat_key: str) -> Outgoing | None:
    row = conn.execute(
        "SELECT o.id, o.chat, o.inbox_id, o.parts, o.sent, o.deliver_by, o.created_at,"
        " p.attempted_at FROM outbox o LEFT JOIN outbox_parts p ON p.outbox_id = o.id"
        " AND p.part = o.sent AND p.status = 'sending'"
        " WHERE o.status = 'pending' AND o.chat_key = ? ORDER BY o.id LIMIT 1",
        (chat_key,),
    ).fetchone()
    if row is None:
        return None
    chat = ChatRef(**json.loads(row[1]))
    return Outgoing(row[0], chat, row[2], _decode_parts(row[3]), *row[4:])
