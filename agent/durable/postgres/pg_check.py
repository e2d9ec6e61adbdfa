"""What `agent state check` and `agent doctor` read of a PostgreSQL store: its schema
version, the rows of each table, the messages waiting for an answer — through a connection
of their own that writes nothing (opening the store would make missing tables; a check
only says they are missing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from agent.durable.inbox import count_waiting
from agent.durable.postgres import pg_schema
from agent.durable.postgres.pg_connection import PgConnection
from agent.durable.postgres.pg_copy import PostgresSide


@dataclass(frozen=True)
class PgChecked:
    version: int  # 0: no pinclaw tables yet
    rows: list[tuple[str, int]] = field(default_factory=list)  # per table, by name
    waiting: int = 0


def check(url: str) -> PgChecked:
    """StateError (StateBusy) when the server cannot be reached."""
    conn = PgConnection.connect(url)
    try:
        version = pg_schema.found_version(conn.raw)
        if version == 0:
            return PgChecked(0)
        return PgChecked(version, PostgresSide(conn.raw).counts(), count_waiting(cast(Any, conn)))
    finally:
        conn.close()
