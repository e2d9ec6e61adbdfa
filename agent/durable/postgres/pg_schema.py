"""The tables in PostgreSQL: made at this pinclaw's schema version, numbered as state.db's.

A PostgreSQL store has no history older than this release, so it is made whole at the
version it meets (every table module's SCHEMA and the columns added since, through
pg_sql.table_script) and that version is written in `pinclaw_meta`. A later step of
agent/durable/file/migrations.py is written for both stores and applied here in the same
order. Several processes may start at once: the first takes a transaction-scoped advisory
lock and the others wait for it, then find the tables made.

Refused, with one line: a database that another program's tables fill (no `pinclaw_meta`,
tables not ours), and one a newer pinclaw made.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from agent.durable import (
    always_allowed,
    file_sources,
    hardware_records,
    inbox,
    jobs,
    learned_model_facts,
    outbox,
    schedules,
    sessions,
    tool_journal,
)
from agent.durable.file.migrations import FIRST_COLUMNS, LATEST
from agent.durable.owner import budget_limits, chat_busy, chat_models, chat_voices, pairings, usage
from agent.durable.postgres.pg_sql import table_script
from tools.memory import schema as memory_schema

log = logging.getLogger(__name__)
SCHEMA_LOCK = 0x70636C77  # "pclw": the advisory lock the first process makes the tables under
META = "CREATE TABLE IF NOT EXISTS pinclaw_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
TABLE_SCRIPTS = (
    sessions.SCHEMA,
    inbox.SCHEMA,
    outbox.SCHEMA,
    schedules.SCHEMA,
    always_allowed.SCHEMA,
    learned_model_facts.SCHEMA,
    memory_schema.SCHEMA,
    outbox.PARTS_SCHEMA,
    tool_journal.SCHEMA,
    usage.SCHEMA,
    budget_limits.SCHEMA,
    chat_models.SCHEMA,
    pairings.SCHEMA,
    hardware_records.SCHEMA,
    file_sources.SCHEMA,
    jobs.SCHEMA,
    chat_busy.SCHEMA,
    chat_voices.SCHEMA,
)
ADDED_COLUMNS = (
    *sessions.MIGRATIONS.values(),
    *inbox.MIGRATIONS.values(),
    sessions.TAINTED_BY,
    sessions.TAINTED_INDEX,
    inbox.TAKEN_BY,
    *memory_schema.ADDED.values(),
    tool_journal.TAINTED_BY,
)
# state.db's trigger (tool_journal.SCHEMA): a message answered, its journal goes with it.
JOURNAL_TRIGGER = (
    "CREATE OR REPLACE FUNCTION tool_journal_done() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN DELETE FROM tool_journal WHERE inbox_id = NEW.id; RETURN NEW; END $$",
    "CREATE TRIGGER tool_journal_done AFTER UPDATE OF status ON inbox FOR EACH ROW"
    " WHEN (NEW.status <> 'pending') EXECUTE FUNCTION tool_journal_done()",
)


class SchemaRefused(Exception):
    """This database must not be used by this pinclaw: `str()` says why, in one line."""


def ensure(conn: psycopg.Connection[Any]) -> int:
    """Make the tables when they are missing, in one transaction; the version found or made.
    SchemaRefused for another program's database or a newer pinclaw's. (`conn` sends its
    parameters as `$1`: psycopg's raw cursor, as pg_connection.py sets it.)"""
    with conn.transaction():
        conn.execute("SET LOCAL lock_timeout = 0")  # the first process takes what it takes
        conn.execute(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
        version = found_version(conn)
        if version > LATEST:
            raise SchemaRefused(
                f"it was written by a newer pinclaw (schema version {version}; this one knows "
                f"up to {LATEST}); upgrade pinclaw"
            )
        if version == 0:
            _refuse_foreign(conn)
            _create(conn)
            version = LATEST
        elif version < LATEST:
            _upgrade(conn)
            version = LATEST
    return version


def tables(conn: psycopg.Connection[Any]) -> list[str]:
    """The tables of the connection's schema, by name."""
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_type = 'BASE TABLE' ORDER BY table_name"
    ).fetchall()
    return [str(name) for (name,) in rows]


def found_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version the database was made at (0: no pinclaw tables yet)."""
    if "pinclaw_meta" not in tables(conn):
        return 0
    row = conn.execute("SELECT value FROM pinclaw_meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _refuse_foreign(conn: psycopg.Connection[Any]) -> None:
    others = [name for name in tables(conn) if name not in FIRST_COLUMNS and name != "pinclaw_meta"]
    if others:
        shown = ", ".join(others[:5])
        raise SchemaRefused(
            f"it holds another program's tables ({shown}) and no pinclaw_meta; give pinclaw a "
            "database of its own (createdb pinclaw)"
        )


def _upgrade(conn: psycopg.Connection[Any]) -> None:
    """A store an older pinclaw made: the tables and columns added since (every statement
    is one that leaves what exists alone), then the version."""
    for script in TABLE_SCRIPTS:
        for sql in table_script(script):
            conn.execute(sql)  # CREATE ... IF NOT EXISTS: our own constant SQL
    for sql in table_script(";".join(ADDED_COLUMNS)):
        conn.execute(sql.replace(" ADD COLUMN ", " ADD COLUMN IF NOT EXISTS "))
    conn.execute("UPDATE pinclaw_meta SET value = $1 WHERE key = 'schema_version'", (str(LATEST),))


def _memory_search(conn: psycopg.Connection[Any]) -> None:
    """The memories' text search (tools/memory/text_index.py). Without pg_trgm (not
    installed, or not this user's to create) substrings are found by reading the rows."""
    for sql in memory_schema.PG_SEARCH:
        conn.execute(sql)  # our own constant SQL
    try:
        with conn.transaction():  # a savepoint: its failure leaves the rest standing
            for sql in memory_schema.PG_TRIGRAMS:
                conn.execute(sql)
    except psycopg.Error as exc:
        why = str(exc).strip().splitlines()[0]
        log.warning("PostgreSQL: no pg_trgm (%s); memories' substrings found without it", why)


def _create(conn: psycopg.Connection[Any]) -> None:
    for script in TABLE_SCRIPTS:
        for sql in table_script(script):
            conn.execute(sql)  # our own constant SQL
    for sql in table_script(";".join(ADDED_COLUMNS)):  # some SCHEMA has already
        conn.execute(sql.replace(" ADD COLUMN ", " ADD COLUMN IF NOT EXISTS "))
    _memory_search(conn)
    for sql in JOURNAL_TRIGGER:
        conn.execute(sql)
    conn.execute(META)
    conn.execute(
        "INSERT INTO pinclaw_meta VALUES ('schema_version', $1), ('application', 'pinclaw')",
        (str(LATEST),),
    )
