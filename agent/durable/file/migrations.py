"""state.db's schema versions: one ordered list of steps, `PRAGMA user_version` the step a
file has reached, `PRAGMA application_id` the mark that it is pinclaw's.

Version 1 is the schema pinclaw 0.1.0 made without versions: each table's SQL in its own
module (sessions, inbox, outbox, schedules, approvals, provider quirks; the memories in
tools/memory/schema.py), with the columns added since its first release. A file with no
version but pinclaw's tables is adopted: its tables' columns are checked, what is missing is
added, and it is marked version 1. Every later change is a numbered step here (its SQL in its
table's module), applied in order, each in its own transaction with the version it reaches,
so a crash half-way leaves a file that the next start carries on from. Those SCHEMA strings
are the tables as their version made them: a later change is a new step, never an edit.

Refused before anything is written: a file with a newer version than LATEST (a newer pinclaw
wrote it: using half of it would lose what this one does not know), and another program's
database (another application id, or tables of its own and none of ours). Each refusal is a
StateDBUnusable: one line that says what to do.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
from agent.durable.file.state_db import StateDBUnusable, check_file, restore_advice, unusable
from agent.durable.owner import budget_limits, chat_busy, chat_models, chat_voices, pairings, usage
from tools.memory import schema as memory_schema
from tools.memory.store import chat_scope

APPLICATION_ID = 0x70636C77  # "pclw": this file is pinclaw's state.db
LegacyScope = Callable[[str], str]  # a memory from before scopes: its chat key -> its scope


@dataclass(frozen=True)
class Step:
    version: int
    what: str
    apply: Callable[[sqlite3.Connection], None]  # inside the step's transaction


def _version_1(conn: sqlite3.Connection) -> None:
    """The tables of 0.1.0; a file from before gains the columns added since."""
    tables = (sessions, inbox, outbox, schedules, always_allowed, learned_model_facts)
    for schema in [module.SCHEMA for module in tables]:
        run_script(conn, schema)
    for table, added in (("messages", sessions.MIGRATIONS), ("inbox", inbox.MIGRATIONS)):
        have = columns(conn, table)
        for column, sql in added.items():
            if column not in have:
                conn.execute(sql)


def _version_2(conn: sqlite3.Connection) -> None:
    """The tool journal (a turn's effectful calls, so that a turn run again does not act
    twice; its trigger follows the inbox's rows) and each sent part's fate (outbox_parts)."""
    run_script(conn, outbox.PARTS_SCHEMA)
    run_script(conn, tool_journal.SCHEMA)


def _version_3(conn: sqlite3.Connection) -> None:
    """Each model call's usage and cost, the budget the owner set by hand and the notices
    given, and each chat's /model choice."""
    run_script(conn, usage.SCHEMA)
    run_script(conn, budget_limits.SCHEMA)
    run_script(conn, chat_models.SCHEMA)


def _version_4(conn: sqlite3.Connection) -> None:
    """Pairing: the codes strangers were given or the owner made, who was let in, and the
    senders locked out."""
    run_script(conn, pairings.SCHEMA)


def _version_5(conn: sqlite3.Connection) -> None:
    """The boards: every change of an output, the deadlines by which outputs go off again
    (max_on_s), the readings of watched pins kept for charts."""
    run_script(conn, hardware_records.SCHEMA)


def _version_6(conn: sqlite3.Connection) -> None:
    """Taint: what untrusted content each turn had read, the memories kept unvetted, and
    the workspace files written after untrusted content."""
    if "tainted_by" not in columns(conn, "messages"):
        conn.execute(sessions.TAINTED_BY)
    conn.execute(sessions.TAINTED_INDEX)
    memory_schema.add_columns(conn)
    run_script(conn, file_sources.SCHEMA)


def _version_7(conn: sqlite3.Connection) -> None:
    """Jobs: the work turns handed to sub-agents, until each result reached its chat."""
    run_script(conn, jobs.SCHEMA)


def _version_8(conn: sqlite3.Connection) -> None:
    """Busy modes: which turn took each inbox row (a burst, a collected or steered message
    is answered by another row's turn), and each chat's /busy choice."""
    if "taken_by" not in columns(conn, "inbox"):
        conn.execute(inbox.TAKEN_BY)
    run_script(conn, chat_busy.SCHEMA)


def _version_9(conn: sqlite3.Connection) -> None:
    """Each chat's /voice choice."""
    run_script(conn, chat_voices.SCHEMA)


def _version_10(conn: sqlite3.Connection) -> None:
    """The untrusted sources each journalled call brought into its turn."""
    if "tainted_by" not in columns(conn, "tool_journal"):
        conn.execute(tool_journal.TAINTED_BY)


STEPS: tuple[Step, ...] = (
    Step(1, "sessions, inbox, outbox, schedules, approvals, quirks, memories", _version_1),
    Step(2, "the tool journal, the parts sent", _version_2),
    Step(3, "usage, budget overrides and notices, chat models", _version_3),
    Step(4, "pairing codes, people and groups let in, locks", _version_4),
    Step(5, "the boards' actuation log, max_on_s deadlines, kept readings", _version_5),
    Step(6, "what turns read of others', unvetted memories, files written after it", _version_6),
    Step(7, "the jobs sub-agents run", _version_7),
    Step(8, "which turn took each inbox row, each chat's busy mode", _version_8),
    Step(9, "each chat's /voice choice", _version_9),
    Step(10, "the taint each journalled call brought into its turn", _version_10),
)
LATEST = STEPS[-1].version

# The columns each table of ours had when it first shipped: a table of that name without
# them is another program's. The memories table had two shapes (chat_key, then scope).
FIRST_COLUMNS: dict[str, frozenset[str]] = {
    "chats": frozenset({"chat_key", "session"}),
    "messages": frozenset(
        {"id", "chat_key", "session", "turn", "position", "role", "message", "created_at"}
    ),
    "summaries": frozenset({"chat_key", "session", "up_to_turn", "content", "created_at"}),
    "inbox": frozenset({"id", "channel", "chat_key", "message_id", "message", "status"}),
    "outbox": frozenset({"id", "channel", "chat_key", "chat", "inbox_id", "parts", "sent"}),
    "outbox_parts": frozenset({"outbox_id", "part", "status"}),
    "schedules": frozenset({"id", "kind", "spec", "task", "channel", "chat_key", "next_due"}),
    "approvals": frozenset({"workspace", "rule", "created_at"}),
    "provider_quirks": frozenset({"model", "quirk", "value", "learned_at"}),
    "memories": frozenset({"id", "content", "created_at"}),
    "tool_journal": frozenset({"id", "inbox_id", "call_id", "tool", "arguments"}),
    "usage": frozenset({"id", "at", "chat_key", "person", "started_by", "model", "cost_usd"}),
    "budget_overrides": frozenset({"name", "value", "configured", "set_at"}),
    "budget_notices": frozenset({"name", "period", "level", "amount", "told_at"}),
    "chat_models": frozenset({"chat_key", "model", "set_by", "set_at"}),
    "chat_busy": frozenset({"chat_key", "mode", "set_by", "set_at"}),
    "jobs": frozenset({"id", "chat_key", "origin", "task", "model", "state", "result"}),
    "pairing_codes": frozenset({"code", "channel", "kind", "sender_id", "expires_at", "status"}),
    "paired": frozenset({"channel", "kind", "id", "approved_by", "approved_at"}),
    "pairing_locks": frozenset({"channel", "sender_id", "wrong", "locked_until"}),
    **hardware_records.FIRST_COLUMNS,
}
_FTS = ("memories_words", "memories_trigram")  # virtual tables, with shadow tables of theirs


@dataclass(frozen=True)
class Found:
    """What a file says about itself, read without writing."""

    application_id: int
    version: int
    tables: frozenset[str]

    @property
    def ours(self) -> frozenset[str]:
        return frozenset(t for t in self.tables if t in FIRST_COLUMNS or t.startswith(_FTS))

    @property
    def others(self) -> frozenset[str]:
        return self.tables - self.ours


def inspect(conn: sqlite3.Connection) -> Found:
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    names = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return Found(app_id, version, frozenset(name for (name,) in names))


def refusal(path: Path, conn: sqlite3.Connection, found: Found) -> StateDBUnusable | None:
    """Why this file must not be used by this pinclaw, or None."""
    if found.application_id not in (0, APPLICATION_ID) or (found.others and not found.ours):
        return _foreign(path, found)
    if found.application_id == 0 and found.version and not found.ours:
        return _foreign(path, found)
    if found.version > LATEST:
        return StateDBUnusable(
            path,
            f"it was written by a newer pinclaw (schema version {found.version}; this one "
            f"knows up to {LATEST})",
            f"upgrade pinclaw, or restore a backup this one made from {path.parent / 'backups'}",
        )
    for table in sorted(found.ours & FIRST_COLUMNS.keys()):
        missing = FIRST_COLUMNS[table] - columns(conn, table)
        if missing:
            return StateDBUnusable(
                path,
                f"its table {table} lacks pinclaw's columns ({', '.join(sorted(missing))}): "
                "another program's database, or damaged",
                restore_advice(path),
            )
    return None


def migrate(conn: sqlite3.Connection, path: Path, legacy_scope: LegacyScope = chat_scope) -> None:
    """Bring the file to LATEST, step by step, or raise StateDBUnusable (nothing written)."""
    found = inspect(conn)
    problem = refusal(path, conn, found)
    if problem is not None:
        raise problem
    if found.application_id == APPLICATION_ID and found.version == LATEST:
        return
    if found.version < 1:
        # Version 1's memories: tools/memory/schema.py creates them and moves the table of
        # before scopes over, in a transaction of its own (tools/ knows nothing of ours).
        memory_schema.ensure(conn, legacy_scope)
    for step in STEPS:
        if step.version > found.version:
            _apply(conn, step)


def diagnose(path: Path, wait_s: float = 2.0) -> StateDBUnusable | None:
    """Why this pinclaw could not use the file at `path` (None: it could, or it is not
    there yet), read without changing it: for `agent doctor`, `agent state check` and a
    command that met an SQLite error."""
    try:
        check_file(path)
        if not path.exists() or path.stat().st_size == 0:
            return None
        conn = sqlite3.connect(path, timeout=wait_s)  # no write: a read-only file is fine
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return refusal(path, conn, inspect(conn))
        finally:
            conn.close()
    except StateDBUnusable as exc:
        return exc
    except sqlite3.Error as exc:
        return unusable(path, exc, wait_s)


def _apply(conn: sqlite3.Connection, step: Step) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) < step.version:  # another
            step.apply(conn)  # process may have taken this step while we waited for the lock
            conn.execute(f"PRAGMA user_version = {step.version}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # the step's own error is the one to see
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _foreign(path: Path, found: Found) -> StateDBUnusable:
    tables = ", ".join(sorted(found.others)[:5]) or "none"
    return StateDBUnusable(
        path,
        f"it is another program's database (tables: {tables}), not pinclaw's",
        f"move it aside (mv {path} {path}.aside) or point PINCLAW_HOME elsewhere, then start again",
    )


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Each statement of `script` inside the caller's transaction (executescript would
    COMMIT first); a trigger's body stays whole."""
    statement = ""
    for piece in script.split(";"):
        statement += piece + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                conn.execute(statement)
            statement = ""


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def describe(version: int) -> str:
    """A file's version in words, for `agent state check` and `agent doctor`."""
    if version == 0:
        return "none (older than schema versions; adopted as version 1 at the next start)"
    if version > LATEST:
        return f"{version}, newer than this pinclaw knows ({LATEST}): refused"
    newer = "" if version == LATEST else f"; brought to {LATEST} at the next start"
    return f"{version} ({STEPS[version - 1].what}{newer})"
