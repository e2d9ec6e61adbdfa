"""The usage table: one row per model call — its tokens (in, of them cached, out), its cost
in US dollars (LiteLLM's price; NULL when LiteLLM has none, a local model's), the model that
answered, the chat, the person, and what started the turn. The budget (agent/runtime/
budget.py) sums it; `agent usage` and /usage show it.

Rows are kept, never rewritten; a call that failed spent nothing the provider reported and
has none.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from agent.durable.file.state_db import StateDB

# What started a turn: a person's message in a chat, a one-shot (`agent run -m`, a line of
# `agent chat`), a schedule, the heartbeat, a pin watch.
StartedBy = Literal["message", "one-shot", "schedule", "heartbeat", "watch", "webhook", "job"]
GroupBy = Literal["day", "chat", "person", "model", "trigger"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    chat_key TEXT NOT NULL,
    person TEXT NOT NULL,
    started_by TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL
);
CREATE INDEX IF NOT EXISTS usage_at ON usage (at);
"""
_COLUMNS = (
    "at, chat_key, person, started_by, model, input_tokens, cached_tokens, output_tokens, cost_usd"
)


@dataclass(frozen=True)
class Call:
    """One model call as kept. `at`: UTC epoch; `cost_usd` None: no price known."""

    at: float
    chat_key: str
    person: str
    started_by: StartedBy
    model: str
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float | None


@dataclass
class Totals:
    """The sum of some calls; `unpriced`: how many had no price (their cost is not in `cost`)."""

    label: str = ""
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    models: set[str] = field(default_factory=set)

    def add(self, call: Call) -> None:
        self.calls += 1
        self.input_tokens += call.input_tokens
        self.cached_tokens += call.cached_tokens
        self.output_tokens += call.output_tokens
        if call.cost_usd is None:
            self.unpriced += 1
        else:
            self.cost_usd += call.cost_usd
        self.models.add(call.model)


class UsageBook:
    """The usage table through StateDB: the daemon's and a one-shot's calls are written here."""

    def __init__(self, db: StateDB) -> None:
        self.db = db

    async def record(self, call: Call) -> None:
        await self.db.write(lambda conn: insert(conn, call))

    async def since(self, since: float) -> list[Call]:
        """Every call from `since` (UTC epoch) on, oldest first."""
        return await self.db.read(lambda conn: calls_since(conn, since))

    async def spent(self, day_start: float, month_start: float) -> dict[str, tuple[float, float]]:
        """For each kind of start: (dollars spent since `day_start`, since `month_start`);
        calls without a price count nothing."""
        return await self.db.read(lambda conn: spent(conn, day_start, month_start))


def insert(conn: sqlite3.Connection, call: Call) -> None:
    conn.execute(
        f"INSERT INTO usage ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            call.at,
            call.chat_key,
            call.person,
            call.started_by,
            call.model,
            call.input_tokens,
            call.cached_tokens,
            call.output_tokens,
            call.cost_usd,
        ),
    )


def calls_since(conn: sqlite3.Connection, since: float) -> list[Call]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM usage WHERE at >= ? ORDER BY at, id", (since,))
    return [Call(*row) for row in rows]


def spent(
    conn: sqlite3.Connection, day_start: float, month_start: float
) -> dict[str, tuple[float, float]]:
    rows = conn.execute(
        "SELECT started_by, COALESCE(SUM(CASE WHEN at >= ? THEN cost_usd END), 0.0),"
        " COALESCE(SUM(cost_usd), 0.0) "
        "FROM usage WHERE at >= ? GROUP BY started_by",
        (day_start, min(day_start, month_start)),
    )
    return {kind: (float(day), float(month)) for kind, day, month in rows}


def day_of(at: float, zone: ZoneInfo) -> str:
    """The calendar day of a call in `zone`, as YYYY-MM-DD."""
    return datetime.fromtimestamp(at, zone).strftime("%Y-%m-%d")


def grouped(calls: Iterable[Call], by: GroupBy, zone: ZoneInfo) -> list[Totals]:
    """The calls summed per day (in `zone`, oldest first) or per chat, person, model or kind
    of start (the most expensive first, then the most tokens)."""
    keys: dict[GroupBy, Callable[[Call], str]] = {
        "day": lambda call: day_of(call.at, zone),
        "chat": lambda call: call.chat_key,
        "person": lambda call: call.person,
        "model": lambda call: call.model,
        "trigger": lambda call: call.started_by,
    }
    key = keys[by]
    groups: dict[str, Totals] = defaultdict(Totals)
    for call in calls:
        name = key(call)
        groups[name].label = name
        groups[name].add(call)
    if by == "day":
        return sorted(groups.values(), key=lambda t: t.label)
    return sorted(groups.values(), key=lambda t: (-t.cost_usd, -t.input_tokens, t.label))


def total(calls: Iterable[Call], label: str = "total") -> Totals:
    summed = Totals(label)
    for call in calls:
        summed.add(call)
    return summed
