"""The "Always allow" answers of the owner, remembered per workspace in state.db — outside the
workspace, so no command can grant itself one; `agent doctor` lists them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    workspace TEXT NOT NULL,
    rule TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, rule)
);
"""


class AlwaysAllowed:
    """The remembered "Always allow" rules of one workspace. Rare and tiny: plain sqlite3."""

    def __init__(self, db_path: Path, workspace: Path) -> None:
        self._path = db_path
        self._workspace = str(workspace)

    def _connect(self) -> sqlite3.Connection:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, timeout=5)
        db.executescript(SCHEMA)
        return db

    def rules(self) -> list[str]:
        if not self._path.exists():
            return []
        with self._connect() as db:
            rows = db.execute(
                "SELECT rule FROM approvals WHERE workspace = ? ORDER BY rule", (self._workspace,)
            ).fetchall()
        return [rule for (rule,) in rows]

    def remember(self, rule: str) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT OR IGNORE INTO approvals VALUES (?, ?, ?)",
                (self._workspace, rule, time.time()),
            )
