"""What the owner set of the budget by hand (`/budget daily 5`, `agent budget set daily 5`),
and which budget notices were given.

An override keeps the configured value it replaced: when config.toml (or the environment)
later says something else for that limit, the file is the newer word and the override is
no longer used. A notice (80 % reached, 100 % reached) is kept per limit, period and amount,
so the owner hears each once — also across restarts and from a one-shot beside the daemon —
and again for a limit they raised.
"""

from __future__ import annotations

import sqlite3
import time

from agent.durable.file.state_db import StateDB
from agent.durable.owner.usage import spent

SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_overrides (
    name TEXT PRIMARY KEY,
    value REAL NOT NULL,
    configured REAL NOT NULL,
    set_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS budget_notices (
    name TEXT NOT NULL,
    period TEXT NOT NULL,
    level INTEGER NOT NULL,
    amount REAL NOT NULL,
    told_at REAL NOT NULL,
    PRIMARY KEY (name, period, level, amount)
);
"""

Overrides = dict[str, tuple[float, float]]  # limit name -> (value, the configured value then)
Spent = dict[str, tuple[float, float]]  # what started the turns -> (dollars today, this month)


class BudgetLimits:
    def __init__(self, db: StateDB) -> None:
        self.db = db

    async def overrides(self) -> Overrides:
        return await self.db.read(overrides)

    async def with_spent(self, day_start: float, month_start: float) -> tuple[Overrides, Spent]:
        """The overrides and what was spent since `day_start` and since `month_start`
        (agent/durable/owner/usage.py), read in one trip: what the budget decides on."""
        return await self.db.read(
            lambda conn: (overrides(conn), spent(conn, day_start, month_start))
        )

    async def set(self, name: str, value: float, configured: float) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO budget_overrides VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE"
                " SET value = excluded.value, configured = excluded.configured,"
                " set_at = excluded.set_at",
                (name, value, configured, time.time()),
            )
        )

    async def clear(self) -> int:
        """Drop every override (the configured limits apply again); how many there were."""
        return await self.db.write(
            lambda conn: conn.execute("DELETE FROM budget_overrides").rowcount
        )

    async def first_notice(self, name: str, period: str, level: int, amount: float) -> bool:
        """Note that the owner is told `level` % of `name`'s `amount` in `period`: True the
        first time, False when they already were."""

        def note(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "INSERT INTO budget_notices VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (name, period, level, amount, time.time()),
            )
            return cursor.rowcount == 1

        return await self.db.write(note)


def overrides(conn: sqlite3.Connection) -> Overrides:
    rows = conn.execute("SELECT name, value, configured FROM budget_overrides")
    return {name: (float(value), float(configured)) for name, value, configured in rows}
