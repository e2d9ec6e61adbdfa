"""Conversation history per chat, in state.db.

A chat's messages are grouped in turns: each turn starts with the user's message and holds
the assistant and tool messages that answered it. The store gives whole turns (`recent`), so
the history a turn sends (agent/conversation/compaction.py, which cuts it by tokens as well
as by count) is cut only at turn boundaries: a tool result is never sent without the call
it answers. A turn whose reply could never be delivered keeps only the user's message: the
model is not told it said what the user never saw. The system prompt and the delivery
instructions are never stored.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agent.durable.file.state_db import StateDB

Message = dict[str, Any]

SCHEMA = """
CREATE TABLE IF NOT EXISTS chats (
    chat_key TEXT PRIMARY KEY,
    session INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_key TEXT NOT NULL,
    session INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_chat ON messages (chat_key, session, id);
CREATE INDEX IF NOT EXISTS messages_by_turn ON messages (chat_key, session, turn);
CREATE TABLE IF NOT EXISTS summaries (
    chat_key TEXT NOT NULL,
    session INTEGER NOT NULL,
    up_to_turn INTEGER NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (chat_key, session, up_to_turn)
);
"""
# Columns added after the first release; an older state.db gains them on open.
MIGRATIONS = {
    "inbox_id": "ALTER TABLE messages ADD COLUMN inbox_id INTEGER",
    "compacted": "ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0",
}
# Version 6 (agent/durable/file/migrations.py): what untrusted content a turn had read
# (tools/taint.py; "" none), kept on each of its messages.
TAINTED_BY = "ALTER TABLE messages ADD COLUMN tainted_by TEXT NOT NULL DEFAULT ''"
# Only the tainted turns' rows, so a new turn's look for one reads none of a clean chat's.
TAINTED_INDEX = (
    "CREATE INDEX IF NOT EXISTS messages_tainted ON messages (chat_key, session, id) "
    "WHERE tainted_by != ''"
)
# A turn whose reply expired undelivered keeps only its user message (position 0).
_DELIVERED = (
    "(m.position = 0 OR m.inbox_id IS NULL OR NOT EXISTS "
    "(SELECT 1 FROM outbox o WHERE o.inbox_id = m.inbox_id AND o.status = 'expired'))"
)
_SESSION = "(SELECT COALESCE(MAX(session), 1) FROM chats WHERE chat_key = ?)"


@dataclass(frozen=True)
class Turn:
    number: int
    messages: list[Message]
    tokens: list[int] = field(default_factory=list)  # per message, counted as stored


@dataclass(frozen=True)
class Recent:
    """The chat's current session as the model may see it: the summary of what was
    compacted, and the whole turns since."""

    summary: str
    turns: list[Turn]


def estimate_tokens(text: str) -> int:
    """A cheap, generous token estimate (about 3 characters a token) for trimming."""
    return len(text) // 3 + 1


class SessionStore:
    def __init__(self, db: StateDB, *, count_tokens: Callable[[str], int] = estimate_tokens):
        self._db = db
        self._count = count_tokens

    @classmethod
    async def open(
        cls, db: StateDB, *, count_tokens: Callable[[str], int] = estimate_tokens
    ) -> SessionStore:
        """The store on an open state.db (its SCHEMA created), older files migrated."""
        await db.write(_migrate)
        return cls(db, count_tokens=count_tokens)

    def tokens(self, message: Message) -> int:
        return self._count(json.dumps(message, ensure_ascii=False))

    async def current(self, chat_key: str) -> int:
        """The chat's session now: what a turn reads and later writes to, so that a /new
        meanwhile keeps its summary and its answer out of the fresh conversation."""
        return int(await self._db.read(lambda conn: _session(conn, chat_key)))

    async def recent(self, chat_key: str, session: int | None = None) -> Recent:
        """The latest summary of the session (None: the current one) and every turn after
        it (one trip to the database: what a turn reads before it runs)."""
        summary, rows = await self._db.read(partial(_recent, chat_key, session))
        turns: list[Turn] = []
        for number, text in rows:
            if not turns or turns[-1].number != number:
                turns.append(Turn(number, []))
            turns[-1].messages.append(json.loads(text))
            turns[-1].tokens.append(self._count(text))  # the text `tokens()` would count
        return Recent(summary, turns)

    async def save_summary(
        self, chat_key: str, up_to_turn: int, content: str, *, session: int | None = None
    ) -> None:
        """Store the summary of every turn up to `up_to_turn` of `session` (None: the current
        one); the originals stay, marked compacted."""

        def save(conn: sqlite3.Connection) -> None:
            number = _session(conn, chat_key) if session is None else session
            conn.execute(
                "INSERT INTO summaries VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (chat_key, session, up_to_turn) DO UPDATE SET"
                " content = excluded.content, created_at = excluded.created_at",
                (chat_key, number, up_to_turn, content, time.time()),
            )
            conn.execute(
                "UPDATE messages SET compacted = 1 WHERE chat_key = ? AND session = ? "
                "AND turn <= ?",
                (chat_key, number, up_to_turn),
            )

        await self._db.write(save)

    async def append_turn(
        self,
        chat_key: str,
        messages: Sequence[Message],
        inbox_id: int | None = None,
        *,
        tainted_by: str = "",
        session: int | None = None,
    ) -> None:
        """Store one turn on its own: the user's message first, then what answered it."""
        await self._db.write(
            lambda conn: self.add_turn(
                conn, chat_key, messages, inbox_id, tainted_by=tainted_by, session=session
            )
        )

    def add_turn(
        self,
        conn: sqlite3.Connection,
        chat_key: str,
        messages: Sequence[Message],
        inbox_id: int | None = None,
        *,
        tainted_by: str = "",
        session: int | None = None,
    ) -> None:
        """Store one turn inside the caller's transaction (`StateDB.write`); `tainted_by`:
        what untrusted content it read, which its words may carry into later turns;
        `session`: the one the turn read (None: the current one)."""
        if not messages:
            return
        session = _session(conn, chat_key) if session is None else session
        row = conn.execute(
            "SELECT COALESCE(MAX(turn), 0) FROM messages WHERE chat_key = ? AND session = ?",
            (chat_key, session),
        ).fetchone()
        turn = (int(row[0]) if row else 0) + 1
        now = time.time()
        conn.executemany(
            "INSERT INTO messages (chat_key, session, turn, position, role, message, created_at,"
            " inbox_id, tainted_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    chat_key,
                    session,
                    turn,
                    position,
                    message.get("role", ""),
                    json.dumps(message, ensure_ascii=False),
                    now,
                    inbox_id,
                    tainted_by,
                )
                for position, message in enumerate(messages)
            ],
        )

    async def tainted_by(self, chat_key: str) -> str:
        """What untrusted content the latest tainted turn of the chat's current session read
        ("": none): its words are in the history, or in the summary of it, that a new turn
        sends, so the new turn starts tainted too (until /new starts a fresh session)."""
        row = await self._db.fetchone(
            f"SELECT tainted_by FROM messages WHERE chat_key = ? AND session = {_SESSION} "
            "AND tainted_by != '' ORDER BY id DESC LIMIT 1",
            (chat_key, chat_key),
        )
        return str(row[0]) if row else ""

    async def new_session(self, chat_key: str) -> None:
        """Start the chat afresh; the old messages stay in the file but leave the history."""

        def start(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO chats (chat_key, session) VALUES (?, ?) "
                "ON CONFLICT(chat_key) DO UPDATE SET session = excluded.session",
                (chat_key, _session(conn, chat_key) + 1),
            )

        await self._db.write(start)

    async def forget(self, chat_key: str) -> None:
        """Remove the chat's history, summaries and session number: for a chat nobody can
        open again (a stateless API call's), whose rows would otherwise stay for good."""

        def remove(conn: sqlite3.Connection) -> None:
            for table in ("messages", "summaries", "chats"):
                conn.execute(f"DELETE FROM {table} WHERE chat_key = ?", (chat_key,))

        await self._db.write(remove)

    async def count(self, chat_key: str) -> int:
        row = await self._db.fetchone(
            "SELECT COUNT(*) FROM messages WHERE chat_key = ? AND session = "
            "(SELECT COALESCE(MAX(session), 1) FROM chats WHERE chat_key = ?)",
            (chat_key, chat_key),
        )
        return int(row[0]) if row else 0


def _migrate(conn: sqlite3.Connection) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    for column, sql in MIGRATIONS.items():
        if column not in columns:
            conn.execute(sql)


def _recent(chat_key: str, session: int | None, conn: sqlite3.Connection) -> tuple[str, list[Any]]:
    session = _session(conn, chat_key) if session is None else session
    row = conn.execute(
        "SELECT up_to_turn, content FROM summaries WHERE chat_key = ? AND session = ? "
        "ORDER BY up_to_turn DESC LIMIT 1",
        (chat_key, session),
    ).fetchone()
    up_to, summary = (int(row[0]), str(row[1])) if row else (0, "")
    rows = conn.execute(
        "SELECT m.turn, m.message FROM messages m WHERE m.chat_key = ? AND m.session = ? "
        f"AND m.turn > ? AND {_DELIVERED} ORDER BY m.id",
        (chat_key, session, up_to),
    ).fetchall()
    return summary, rows


def _session(conn: sqlite3.Connection, chat_key: str) -> int:
    row = conn.execute("SELECT session FROM chats WHERE chat_key = ?", (chat_key,)).fetchone()
    return int(row[0]) if row else 1
