"""How each chat's new messages meet a running turn, as `/busy MODE` set it, kept across
restarts. A chat without a row uses its channel's `busy` (or `[channels] busy`); `/busy
reset` removes its row."""

from __future__ import annotations

import time

from agent.durable.file.state_db import StateDB

SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_busy (
    chat_key TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at REAL NOT NULL
);
"""


class ChatBusy:
    def __init__(self, db: StateDB) -> None:
        self.db = db

    async def get(self, chat_key: str) -> str | None:
        row = await self.db.fetchone("SELECT mode FROM chat_busy WHERE chat_key = ?", (chat_key,))
        return str(row[0]) if row else None

    async def choose(self, chat_key: str, mode: str, set_by: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO chat_busy VALUES (?, ?, ?, ?) ON CONFLICT (chat_key) DO UPDATE SET"
                " mode = excluded.mode, set_by = excluded.set_by, set_at = excluded.set_at",
                (chat_key, mode, set_by, time.time()),
            )
        )

    async def reset(self, chat_key: str) -> None:
        await self.db.write(
            lambda conn: conn.execute("DELETE FROM chat_busy WHERE chat_key = ?", (chat_key,))
        )
