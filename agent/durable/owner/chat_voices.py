"""Each chat's `/voice` choice — replies as voice notes "never", "when_spoken_to" or
"always" — kept across restarts. A chat without a row follows `[voice] reply`; `/voice reset`
removes its row."""

from __future__ import annotations

import time
from typing import cast

from agent.durable.file.state_db import StateDB
from channels.config import VoiceReply

SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_voices (
    chat_key TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at REAL NOT NULL
);
"""
MODES: tuple[VoiceReply, ...] = ("never", "when_spoken_to", "always")


class ChatVoices:
    def __init__(self, db: StateDB) -> None:
        self.db = db

    async def get(self, chat_key: str) -> VoiceReply | None:
        row = await self.db.fetchone("SELECT mode FROM chat_voices WHERE chat_key = ?", (chat_key,))
        return cast(VoiceReply, row[0]) if row and row[0] in MODES else None

    async def choose(self, chat_key: str, mode: VoiceReply, set_by: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO chat_voices VALUES (?, ?, ?, ?) ON CONFLICT (chat_key) DO UPDATE SET"
                " mode = excluded.mode, set_by = excluded.set_by, set_at = excluded.set_at",
                (chat_key, mode, set_by, time.time()),
            )
        )

    async def reset(self, chat_key: str) -> bool:
        """Back to `[voice] reply`; False when the chat had no choice of its own."""
        return await self.db.write(
            lambda conn: (
                conn.execute("DELETE FROM chat_voices WHERE chat_key = ?", (chat_key,)).rowcount > 0
            )
        )
