"""The memories table in state.db, its two full-text indexes, and the move from the old table.

`memories` holds the rows; `memories_words` (unicode61, over the terms of memory_text.py)
and `memories_trigram` (trigram, over the raw text) are kept in step by the store in the
same transaction as each change, so a crash never leaves an index pointing at nothing.
Other code writes state.db at the same time: every connection waits for the write lock
(busy_timeout) instead of failing, and changes start with BEGIN IMMEDIATE.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from tools.memory.text import index_terms

BUSY_TIMEOUT_MS = 10_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    content TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    source TEXT NOT NULL DEFAULT 'tool' CHECK (source IN ('chat', 'tool', 'import')),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS memories_by_scope ON memories (scope, id);
"""
INDEXES = """
CREATE VIRTUAL TABLE IF NOT EXISTS memories_words USING fts5(terms, tokenize='unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS memories_trigram USING fts5(text, tokenize='trigram');
"""
# On PostgreSQL the text search is two columns of memories instead (text_index.PgTextIndex),
# made with the tables (agent/durable/postgres/pg_schema.py); the trigram index needs pg_trgm.
PG_SEARCH = (
    "ALTER TABLE memories ADD COLUMN terms TSVECTOR NOT NULL DEFAULT ''",
    "ALTER TABLE memories ADD COLUMN folded TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX memories_by_terms ON memories USING gin (terms) WITH (fastupdate = off)",
)
PG_TRIGRAMS = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX memories_by_text ON memories USING gin (folded gin_trgm_ops)"
    " WITH (fastupdate = off)",
)
COLUMNS = "id, scope, content, tags, source, created_at, updated_at, unvetted"
# Columns added since SCHEMA's shape (state.db's version 6): what an unvetted memory was
# kept after ("" vetted). A table of an older shape gains them (add_columns).
ADDED = {"unvetted": "ALTER TABLE memories ADD COLUMN unvetted TEXT NOT NULL DEFAULT ''"}


def connect(path: Path) -> sqlite3.Connection:
    """A connection of its own, used on one worker thread, committed explicitly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    _use_wal(db)
    db.execute("PRAGMA synchronous=FULL")
    return db


def _use_wal(db: sqlite3.Connection) -> None:
    """WAL is kept in the file, so only the first connection switches; and the switch is not
    covered by busy_timeout (SQLite answers "locked" at once while another connection holds
    the file), so connections racing on a new file wait their turn here."""
    for attempt in range(200):
        if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            return
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError:
            if attempt == 199:
                raise
            time.sleep(0.025)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def ensure(db: sqlite3.Connection, legacy_scope: Callable[[str], str]) -> None:
    """Create what is missing; move a table of the old shape (chat_key, no scope) over.

    The old rows keep their ids and dates; each gets `legacy_scope(chat_key)` as its scope.
    All of it happens in one transaction: a crash halfway leaves the old table as it was.
    """
    tables = _tables(db)
    wanted = {"memories", "memories_words", "memories_trigram"}
    if wanted <= tables and "scope" in _columns(db, "memories"):
        _add_columns(db)
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        tables = _tables(db)  # again, under the lock: another process may have done it
        legacy = "memories" in tables and "chat_key" in _columns(db, "memories")
        if legacy:
            db.execute("ALTER TABLE memories RENAME TO memories_legacy")
        for statement in (SCHEMA + INDEXES).split(";"):
            if statement.strip():
                db.execute(statement)
        if legacy:
            db.create_function("legacy_scope", 1, legacy_scope, deterministic=True)
            db.execute(
                "INSERT INTO memories (id, scope, content, tags, source, created_at, updated_at)"
                " SELECT id, legacy_scope(chat_key), content, '[]', 'tool', created_at,"
                " created_at FROM memories_legacy ORDER BY id"
            )
            db.execute("DROP TABLE memories_legacy")
        if legacy or "memories_words" not in tables or "memories_trigram" not in tables:
            reindex(db)
        add_columns(db)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _add_columns(db: sqlite3.Connection) -> None:
    """The columns added since SCHEMA, in a transaction of their own when any is missing."""
    if all(name in _columns(db, "memories") for name in ADDED):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        add_columns(db)  # again, under the lock: another process may have added them
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def add_columns(db: sqlite3.Connection) -> None:
    """Add what the memories table lacks of ADDED (inside the caller's transaction)."""
    have = _columns(db, "memories")
    for name, sql in ADDED.items():
        if name not in have:
            db.execute(sql)


def reindex(db: sqlite3.Connection) -> None:
    """Both full-text indexes rebuilt from the rows (inside the caller's transaction)."""
    db.execute("DELETE FROM memories_words")
    db.execute("DELETE FROM memories_trigram")
    for ident, content, tags in db.execute("SELECT id, content, tags FROM memories").fetchall():
        index(db, ident, content, json.loads(tags))


def index(db: sqlite3.Connection, ident: int, content: str, tags: list[str]) -> None:
    """Make one memory findable (its text and its tags)."""
    text = searchable(content, tags)
    db.execute(
        "INSERT INTO memories_words (rowid, terms) VALUES (?, ?)",
        (ident, " ".join(index_terms(text))),
    )
    db.execute("INSERT INTO memories_trigram (rowid, text) VALUES (?, ?)", (ident, text))


def searchable(content: str, tags: list[str]) -> str:
    """The text a memory is found by: its content, then its tags."""
    return "\n".join([content, *tags])


def unindex(db: sqlite3.Connection, ident: int) -> None:
    db.execute("DELETE FROM memories_words WHERE rowid = ?", (ident,))
    db.execute("DELETE FROM memories_trigram WHERE rowid = ?", (ident,))
