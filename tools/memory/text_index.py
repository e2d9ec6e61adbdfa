"""Where the memories' candidates come from: the store's own text search, one per database.

search.py scores every candidate in Python, the same on both stores; only finding them is
the database's. Both stores keep, for each memory, the terms of text.index_terms (our
own folding, so the database's never decides what a word is) and its text for substrings:

- SQLite (Fts5Index): two FTS5 tables beside `memories` (schema.py), ranked by BM25;
- PostgreSQL (PgTextIndex): two columns of `memories` (schema.PG_SEARCH) — `terms`, a
  tsvector of exactly those terms (no parser, no dictionary), under a GIN index and ranked by
  ts_rank; `folded`, the text NFKC case-folded as the scorer reads it, found with LIKE under
  pg_trgm's GIN trigram index when the server has pg_trgm (else LIKE reads the rows).

Every method runs inside the caller's trip on the store's connection.
"""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from collections.abc import Sequence
from typing import Any, Protocol

from tools.memory import schema
from tools.memory.text import fts_query, index_terms

MEMORY_LOCK = 0x6D656D6F  # "memo": PostgreSQL's advisory lock over a twin check and its write
MAX_LEXEME_BYTES = 2046  # PostgreSQL's limit for one tsvector term


class TextIndex(Protocol):
    def lock(self, db: sqlite3.Connection) -> None:
        """Keep other processes' twin checks out until this transaction ends."""

    def add(self, db: sqlite3.Connection, ident: int, content: str, tags: Sequence[str]) -> None:
        """Make a memory (new, or with new text) findable."""

    def remove(self, db: sqlite3.Connection, ident: int) -> None:
        """Forget what made a memory findable (before it is deleted or rewritten)."""

    def count(self, db: sqlite3.Connection, term: str, cap: int) -> int:
        """How many memories hold `term` as a whole term, counted up to `cap`."""

    def words(
        self,
        db: sqlite3.Connection,
        terms: Sequence[str],
        scopes: Sequence[str] | None,
        k: int,
        *,
        ranked: bool,
    ) -> list[int]:
        """Up to `k` ids of `scopes` (None: all) holding any of `terms`: best ranked first,
        or (not ranked) newest first."""

    def substrings(
        self, db: sqlite3.Connection, pieces: Sequence[str], scopes: Sequence[str] | None, k: int
    ) -> list[int]:
        """Up to `k` ids of `scopes` whose text holds any of `pieces` (3 characters or more),
        newest first, letter case aside."""


def _in_scopes(scopes: Sequence[str] | None, column: str) -> tuple[str, tuple[str, ...]]:
    if scopes is None:
        return "", ()
    return f" AND {column} IN ({','.join('?' * len(scopes))})", tuple(scopes)


class Fts5Index:
    """state.db's: memories_words (unicode61 over the terms), memories_trigram (raw text)."""

    def lock(self, db: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE already holds state.db's one write lock."""

    def add(self, db: sqlite3.Connection, ident: int, content: str, tags: Sequence[str]) -> None:
        schema.index(db, ident, content, list(tags))

    def remove(self, db: sqlite3.Connection, ident: int) -> None:
        schema.unindex(db, ident)

    def count(self, db: sqlite3.Connection, term: str, cap: int) -> int:
        sql = (
            "SELECT count(*) FROM (SELECT 1 FROM memories_words WHERE memories_words MATCH ?"
            " LIMIT ?)"
        )
        return int(db.execute(sql, (fts_query([term]), cap)).fetchone()[0])

    def words(
        self,
        db: sqlite3.Connection,
        terms: Sequence[str],
        scopes: Sequence[str] | None,
        k: int,
        *,
        ranked: bool,
    ) -> list[int]:
        return self._match(db, "memories_words", terms, scopes, k, ranked=ranked)

    def substrings(
        self, db: sqlite3.Connection, pieces: Sequence[str], scopes: Sequence[str] | None, k: int
    ) -> list[int]:
        return self._match(db, "memories_trigram", pieces, scopes, k, ranked=False)

    def _match(
        self,
        db: sqlite3.Connection,
        table: str,
        terms: Sequence[str],
        scopes: Sequence[str] | None,
        k: int,
        *,
        ranked: bool,
    ) -> list[int]:
        order = f"bm25({table})" if ranked else "f.rowid DESC"
        scoped, params = _in_scopes(scopes, "m.scope")
        join = " JOIN memories m ON m.id = f.rowid" if scopes is not None else ""
        sql = (
            f"SELECT f.rowid FROM {table} f{join} WHERE {table} MATCH ?{scoped} "
            f"ORDER BY {order} LIMIT ?"
        )
        return [row[0] for row in db.execute(sql, (fts_query(terms), *params, k))]


class PgTextIndex:
    """PostgreSQL's: the `terms` and `folded` columns of memories (module docstring)."""

    def lock(self, db: sqlite3.Connection) -> None:
        """READ COMMITTED lets two processes both find no twin and both insert: one waits."""
        db.execute("SELECT pg_advisory_xact_lock(?)", (MEMORY_LOCK,))

    def add(self, db: sqlite3.Connection, ident: int, content: str, tags: Sequence[str]) -> None:
        db.execute(_SET_SEARCH, _search_row(ident, content, tags))

    def reindex(self, db: sqlite3.Connection) -> None:
        """Every memory made findable from its row (rows copied in: agent state migrate)."""
        rows = db.execute("SELECT id, content, tags FROM memories").fetchall()
        db.executemany(_SET_SEARCH, [_search_row(i, c, json.loads(t)) for i, c, t in rows])

    def remove(self, db: sqlite3.Connection, ident: int) -> None:
        """Nothing to do: the columns go with the row, and add() rewrites both."""

    def count(self, db: sqlite3.Connection, term: str, cap: int) -> int:
        if not _lexeme(term):
            return 0  # too long to be kept as a term (add): only found as a substring
        sql = "SELECT count(*) FROM (SELECT 1 FROM memories WHERE terms @@ ?::tsquery LIMIT ?) f"
        return int(db.execute(sql, (_tsquery([term]), cap)).fetchone()[0])

    def words(
        self,
        db: sqlite3.Connection,
        terms: Sequence[str],
        scopes: Sequence[str] | None,
        k: int,
        *,
        ranked: bool,
    ) -> list[int]:
        query = _tsquery(terms)
        scoped, params = _in_scopes(scopes, "scope")
        # ts_rank normalised by 1 + log(length), as BM25 weighs a long text down; ties: the
        # older first, as FTS5 gives them
        order = "ts_rank(terms, ?::tsquery, 1) DESC, id" if ranked else "id DESC"
        sql = f"SELECT id FROM memories WHERE terms @@ ?::tsquery{scoped} ORDER BY {order} LIMIT ?"
        ranks = (query,) if ranked else ()
        return [row[0] for row in db.execute(sql, (query, *params, *ranks, k))]

    def substrings(
        self, db: sqlite3.Connection, pieces: Sequence[str], scopes: Sequence[str] | None, k: int
    ) -> list[int]:
        likes = " OR ".join("folded LIKE ? ESCAPE '\\'" for _ in pieces)
        scoped, params = _in_scopes(scopes, "scope")
        sql = f"SELECT id FROM memories WHERE ({likes}){scoped} ORDER BY id DESC LIMIT ?"
        patterns = tuple(f"%{_escape_like(_fold(piece))}%" for piece in pieces)
        return [row[0] for row in db.execute(sql, (*patterns, *params, k))]


_SET_SEARCH = "UPDATE memories SET terms = array_to_tsvector(?::text[]), folded = ? WHERE id = ?"


def _search_row(ident: int, content: str, tags: Sequence[str]) -> tuple[Any, ...]:
    text = schema.searchable(content, list(tags))
    return [term for term in index_terms(text) if _lexeme(term)], _fold(text), ident


def _lexeme(term: str) -> bool:
    return len(term.encode()) <= MAX_LEXEME_BYTES


def _fold(text: str) -> str:
    """What the scorer compares substrings in (search._Question.score)."""
    return unicodedata.normalize("NFKC", text).casefold()


def _tsquery(terms: Sequence[str]) -> str:
    """Any of `terms`, each quoted: a tsquery's input is taken as it is, never parsed."""
    quoted = ("'" + term.replace("\\", "\\\\").replace("'", "''") + "'" for term in terms)
    return " | ".join(quoted)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


FTS5 = Fts5Index()
POSTGRES = PgTextIndex()
