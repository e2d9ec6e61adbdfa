"""The "Always allow" answers of the owner, remembered per workspace in state.db — outside the
workspace, so no command can grant itself one; `agent doctor` lists them.

The daemon reads and writes them through StateDB (its one connection, off the event loop);
a command that only reads them (`agent doctor`) runs `read_rules` through agent/durable/store.py's
read_state.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from agent.durable.file.state_db import StateDB

SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    workspace TEXT NOT NULL,
    rule TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, rule)
);
"""
_RULES = "SELECT rule FROM approvals WHERE workspace = ? ORDER BY rule"


class AlwaysAllowed:
    """The remembered "Always allow" rules of one workspace."""

    def __init__(self, db: StateDB, workspace: Path) -> None:
        self._db = db
        self._workspace = str(workspace)

    async def rules(self) -> list[str]:
        return [rule for (rule,) in await self._db.fetchall(_RULES, (self._workspace,))]

    async def remember(self, rule: str) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                "INSERT INTO approvals VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (self._workspace, rule, time.time()),
            )
        )


def read_rules(conn: sqlite3.Connection, workspace: Path) -> list[str]:
    return [rule for (rule,) in conn.execute(_RULES, (str(workspace),)).fetchall()]
