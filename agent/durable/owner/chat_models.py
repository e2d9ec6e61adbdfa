"""The model each chat was switched to with `/model NAME`, kept across restarts. A chat
without a row uses `llm.model`; `/model reset` removes its row. Whether a kept name is still
one of the configured models is the reader's question (agent/runtime/owner/metering.py): a model
taken out of config.toml is simply no longer used."""

from __future__ import annotations

import time

from agent.durable.file.state_db import StateDB

SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_models (
    chat_key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at REAL NOT NULL
);
"""


class ChatModels:
    def __init__(self, db: StateDB) -> None:
        self.db = db

    async def get(self, chat_key: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT model FROM chat_models WHERE chat_key = ?", (chat_key,)
        )
        return str(row[0]) if row else None

    async def choose(self, chat_key: str, model: str, set_by: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO chat_models VALUES (?, ?, ?, ?) ON CONFLICT (chat_key) DO UPDATE SET"
                " model = excluded.model, set_by = excluded.set_by, set_at = excluded.set_at",
                (chat_key, model, set_by, time.time()),
            )
        )

    async def reset(self, chat_key: str) -> bool:
        """Back to llm.model; False when the chat had no choice of its own."""
        return await self.db.write(
            lambda conn: (
                conn.execute("DELETE FROM chat_models WHERE chat_key = ?", (chat_key,)).rowcount > 0
            )
        )
