"""MemoryStore: the agent's long-term memories in state.db or PostgreSQL, found by words and
by meaning.

Each memory belongs to a scope, an opaque string the runtime chooses ("person:alice",
"group:telegram:-100:7"); the store never invents one, and every read names the scopes it
may see. Search ranks by words (search.py: English, Korean, Japanese and emoji alike)
and, when an embedder is given, also by meaning (cosine similarity of embeddings), the
two orders merged by reciprocal-rank fusion.

Calls run on the store's one connection, kept on a thread of its own (db.py), so scoring
and the vector scan stay off the event loop; each change is one transaction there (BEGIN
IMMEDIATE), and the state.db that other code writes at the same time is shared through
SQLite's own locking (WAL, busy_timeout). On PostgreSQL the store is given the process's
state connection instead (agent/app.py), and the same SQL runs there; only the text search
differs (text_index.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from tools.config import RECALL_THRESHOLD
from tools.memory import schema
from tools.memory.db import Database, MemoryDB
from tools.memory.rows import ForgetResult, Memory, Source, from_row, parse_row, tidy_tags, to_row
from tools.memory.search import lexical, twin
from tools.memory.text import normalise
from tools.memory.text_index import FTS5, TextIndex
from tools.memory.vectors import best, pack, reciprocal_rank_fusion, similarities, unit

__all__ = [
    "RECALL_THRESHOLD",
    "Embedder",
    "ForgetResult",
    "Memory",
    "MemoryStore",
    "Source",
    "chat_scope",
]

log = logging.getLogger(__name__)

Vectors = list[list[float]]
Embedder = Callable[[list[str]], Awaitable[Vectors]]
Rows = list[dict[str, Any]]
Texts = list[str]
New = tuple[str, str, tuple[str, ...], Source, str]  # scope, content, tags, source, unvetted
Memories = list[Memory]  # (inside MemoryStore, `list` is the method)
T = TypeVar("T")

FORGET_THRESHOLD = 0.5  # forget(query=...) deletes a lone match only from this score on
EMBED_TIMEOUT_S = 10.0
BACKFILL_BATCH = 32  # memories without an embedding embedded per search, with the query


def chat_scope(chat_key: str) -> str:
    """The scope of a chat's memories when nobody resolved a person or group for it."""
    return f"chat:{chat_key}"


class MemoryStore:
    def __init__(
        self,
        db: Path | Database,
        *,
        text: TextIndex = FTS5,
        embed: Embedder | None = None,
        legacy_scope: Callable[[str], str] = chat_scope,
        embed_timeout_s: float = EMBED_TIMEOUT_S,
    ) -> None:
        """`db`: state.db's path, which the store opens (and closes) itself, making the
        tables (memories from before scopes get `legacy_scope(chat_key)`); or a Database the
        store shares, whose tables its owner made and whose text search `text` is."""
        self._embed = embed
        self._embed_timeout_s = embed_timeout_s
        self._dim: int | None = None  # length of the embedder's vectors, once seen
        self._text = text
        self._db: Database = (
            MemoryDB(db, lambda conn: schema.ensure(conn, legacy_scope))
            if isinstance(db, Path)
            else db
        )

    # ---- writing ----

    async def add(
        self,
        scope: str,
        content: str,
        *,
        tags: Iterable[str] = (),
        source: Source = "tool",
        unvetted: str = "",
    ) -> tuple[Memory, bool]:
        """Keep `content` in `scope`; the bool says whether an existing memory was updated.

        A memory of the same scope that says almost the same thing (memory_text.near_duplicate:
        equal once normalised, or 95 % alike with the same numbers) is updated instead of
        duplicated: its text becomes the new wording, its tags gain the new ones, its
        creation date stays; it is unvetted when the new wording is (`unvetted`: what the
        turn had read that the owner did not write). ValueError for an empty scope or content.
        """
        content = content.strip()
        if not content or not scope.strip():  # a scope is opaque: used exactly as given
            raise ValueError("a memory needs a scope and some content")
        clean_tags = tidy_tags(tags)
        blob = None
        if self._embed is not None:
            vectors = await self._embed_or_none([content])
            blob = pack(vectors[0]) if vectors else None

        def add(db: sqlite3.Connection) -> tuple[Memory, bool]:
            new = (scope, content, clean_tags, source, unvetted)  # twin check and write: one lock
            self._text.lock(db)
            found = twin(db, self._text, scope, content)
            return _write(db, self._text, found, new, blob, time.time())

        return await self._db.write(add)

    async def forget(
        self, scopes: Sequence[str] | None, *, id: int | None = None, query: str | None = None
    ) -> ForgetResult:
        """Delete one memory of `scopes` (None: any scope), named by `id` or by `query`.

        A query deletes the memory whose text it is (normalised), or the only memory that
        matches it with a score of FORGET_THRESHOLD or more. When several match (score of
        RECALL_THRESHOLD or more), nothing is deleted and they come back as candidates.
        """
        if (id is None) == (query is None):
            raise ValueError("forget takes exactly one of id and query")
        scope_list = None if scopes is None else tuple(scopes)

        def forget(db: sqlite3.Connection) -> ForgetResult:
            if id is not None:
                found = _get(db, id)
                if found is None or (scope_list is not None and found.scope not in scope_list):
                    return ForgetResult()
                _delete(db, self._text, found.id)
                return ForgetResult(deleted=found)
            assert query is not None
            hits = lexical(db, self._text, scope_list, query, k=5)
            matches = [
                replace(m, score=h.score)
                for h in hits
                if h.score >= RECALL_THRESHOLD and (m := _get(db, h.id)) is not None
            ]
            exact = [m for m in matches if normalise(m.content) == normalise(query)]
            lone = matches if len(matches) == 1 and matches[0].score >= FORGET_THRESHOLD else []
            chosen = exact if len(exact) == 1 else lone
            if chosen:
                _delete(db, self._text, chosen[0].id)
                return ForgetResult(deleted=chosen[0])
            return ForgetResult(candidates=tuple(matches))

        return await self._db.write(forget)

    async def import_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Add exported rows (see export()); returns how many became new memories.

        Every row is checked first (a ValueError names the first bad one and nothing is
        written), then all are added in one transaction, each like add() with source
        "import": a row almost identical to a memory of its scope that was there before
        updates that memory, and so does a row whose normalised text repeats an earlier row
        of the same scope; importing the same file twice adds nothing the second time. Ids
        in the rows are ignored; dates are kept. Embeddings are computed on later searches.
        """
        now = time.time()
        parsed = [parse_row(row, n, now) for n, row in enumerate(rows, start=1)]

        def import_all(db: sqlite3.Connection) -> int:
            # Look every twin up before writing anything: FTS5 flushes its pending writes
            # at each query, and interleaving them makes a large import crawl.
            self._text.lock(db)
            first: dict[tuple[str, str], int] = {}
            twins: dict[int, Memory | None] = {}
            for i, row in enumerate(parsed):
                key = (row.scope, normalise(row.content))
                if key not in first:
                    first[key] = i
                    twins[i] = twin(db, self._text, row.scope, row.content)
            written: dict[int, Memory] = {}
            added = 0
            for i, row in enumerate(parsed):
                j = first[(row.scope, normalise(row.content))]
                earlier = twins[i] if i == j else written[j]  # a repeat within the file
                new: New = (row.scope, row.content, tidy_tags(row.tags), "import", "")
                dates = (row.updated_at, row.created_at)
                written[j], updated = _write(db, self._text, earlier, new, None, *dates)
                added += not updated
            return added

        return await self._db.write(import_all) if parsed else 0

    # ---- reading ----

    async def search(
        self, scopes: Sequence[str], query: str, *, limit: int = 5, min_score: float = 0.0
    ) -> Memories:
        """The memories of `scopes` most relevant to `query`, best first, at most `limit`.

        Each carries a `score` in [0, 1]: without embeddings, its word score
        (search.py: the larger of the share of the question the memory holds, by
        rarity of words, and the share of the memory the question touches; 0 = no word in
        common). With embeddings, the larger of that and the cosine similarity of the two
        embeddings (below 0 counts as 0); the order is then the reciprocal-rank fusion of
        the word ranking and the similarity ranking. Only memories scoring above 0 and at
        least `min_score` come back: RECALL_THRESHOLD (0.3) keeps unrelated ones out.

        When the embedder fails or times out, the search runs on words alone, with one
        warning in the log.
        """
        scope_list = tuple(scopes)
        if not scope_list or not query.strip() or limit < 1:
            return []
        vector = await self._query_vector(scope_list, query) if self._embed else None
        k = max(limit * 4, 20)

        def search(db: sqlite3.Connection) -> Memories:
            hits = lexical(db, self._text, scope_list, query, k=k)
            words = {hit.id: hit.score for hit in hits}
            if vector is None:
                scores, order = words, [hit.id for hit in hits]
            else:
                marks = ",".join("?" * len(scope_list))
                rows = db.execute(
                    f"SELECT id, embedding FROM memories WHERE scope IN ({marks}) "
                    "AND embedding IS NOT NULL",
                    scope_list,
                )
                similar = similarities(vector, rows)
                fused = reciprocal_rank_fusion(list(words), best(similar, k))
                scores = {i: max(words.get(i, 0.0), similar.get(i, 0.0)) for i in fused}
                order = sorted(fused, key=lambda i: (-fused[i], -scores[i], -i))
            kept = [i for i in order if scores[i] > 0 and scores[i] >= min_score][:limit]
            found = (_get(db, i) for i in kept)
            return [replace(m, score=round(scores[m.id], 4)) for m in found if m is not None]

        return await self._run(search)

    async def get(self, id: int) -> Memory | None:
        return await self._run(lambda db: _get(db, id))

    async def list(
        self, scopes: Sequence[str] | None = None, limit: int = 100, *, unvetted: bool = False
    ) -> Memories:
        """The newest memories first, of `scopes` (None: all); `unvetted`: only those."""
        where, params = _scope_clause(scopes)
        if unvetted:
            where = f"{where} {'AND' if where else 'WHERE'} unvetted != ''"
        sql = f"SELECT {schema.COLUMNS} FROM memories {where} ORDER BY id DESC LIMIT ?"
        return await self._run(lambda db: [from_row(r) for r in db.execute(sql, (*params, limit))])

    async def vet(self, id: int) -> Memory | None:
        """The owner vouches for a memory: it is recalled as any other from now on."""

        def vet(db: sqlite3.Connection) -> Memory | None:
            if _get(db, id) is not None:  # None too for an id SQL cannot hold
                db.execute("UPDATE memories SET unvetted = '' WHERE id = ?", (id,))
            return _get(db, id)

        return await self._db.write(vet)

    async def scopes(self) -> Texts:
        """Every scope that holds a memory, sorted (for the owner, who sees them all)."""
        sql = "SELECT DISTINCT scope FROM memories ORDER BY scope"
        return await self._run(lambda db: [row[0] for row in db.execute(sql)])

    async def export(self, scopes: Sequence[str] | None = None) -> Rows:
        """Every memory of `scopes` (None: all), oldest first, as plain JSON-ready dicts:
        id, scope, content, tags, source, created_at and updated_at (ISO 8601, UTC).
        Embeddings are left out: they belong to one model and are recomputed."""
        where, params = _scope_clause(scopes)
        sql = f"SELECT {schema.COLUMNS} FROM memories {where} ORDER BY id"
        return await self._run(lambda db: [to_row(from_row(r)) for r in db.execute(sql, params)])

    # ---- embeddings ----

    async def _embed_or_none(self, texts: Texts) -> Vectors | None:
        assert self._embed is not None
        try:
            vectors = await asyncio.wait_for(self._embed(texts), self._embed_timeout_s)
            if len(vectors) != len(texts) or not all(vectors):
                raise ValueError(f"{len(vectors)} embeddings for {len(texts)} texts")
        except Exception as exc:
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            log.warning("memory: embeddings failed (%s); searching by words only", reason)
            return None
        self._dim = len(vectors[0])
        return vectors

    async def _query_vector(self, scopes: tuple[str, ...], query: str) -> Any:
        """The query's unit vector, embedding with it some memories that have none yet."""
        missing = await self._run(lambda db: _unembedded(db, scopes, self._dim))
        vectors = await self._embed_or_none([query, *(text for _, text in missing)])
        if vectors is None:
            return None
        if missing:
            filled = [(pack(v), i, text) for (i, text), v in zip(missing, vectors[1:], strict=True)]

            def store(db: sqlite3.Connection) -> None:
                db.executemany(
                    "UPDATE memories SET embedding = ? WHERE id = ? AND content = ?", filled
                )

            await self._db.write(store)
        return unit(vectors[0])

    # ---- plumbing ----

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)` on the store's thread, outside a transaction (reads)."""
        return await self._db.read(work)

    async def close(self) -> None:
        """Let go of state.db; a later call opens it again. (A Database given is its owner's
        to close.)"""
        if isinstance(self._db, MemoryDB):
            await self._db.close()


def _get(db: sqlite3.Connection, ident: int) -> Memory | None:
    if not -(2**63) <= ident < 2**63:  # SQL's integers (SQLite's, BIGINT): no such row
        return None
    row = db.execute(f"SELECT {schema.COLUMNS} FROM memories WHERE id = ?", (ident,)).fetchone()
    return from_row(row) if row else None


def _delete(db: sqlite3.Connection, text: TextIndex, ident: int) -> None:
    text.remove(db, ident)
    db.execute("DELETE FROM memories WHERE id = ?", (ident,))


def _scope_clause(scopes: Sequence[str] | None) -> tuple[str, tuple[str, ...]]:
    if scopes is None:
        return "", ()
    scope_list = tuple(scopes)
    return f"WHERE scope IN ({','.join('?' * len(scope_list))})", scope_list


def _write(
    db: sqlite3.Connection,
    text: TextIndex,
    twin: Memory | None,
    new: New,
    blob: bytes | None,
    now: float,
    created: float | None = None,
) -> tuple[Memory, bool]:
    """Insert the memory `new` (scope, content, tags, source, unvetted), or update its
    `twin` (which takes the new wording's standing: unvetted words make it unvetted)."""
    scope, content, tags, source, unvetted = new
    if twin is not None:
        merged = tidy_tags([*twin.tags, *tags])
        if blob is None and normalise(twin.content) != normalise(content):
            db.execute("UPDATE memories SET embedding = NULL WHERE id = ?", (twin.id,))
        elif blob is not None:
            db.execute("UPDATE memories SET embedding = ? WHERE id = ?", (blob, twin.id))
        updated = max(now, twin.updated_at)
        db.execute(
            "UPDATE memories SET content = ?, tags = ?, updated_at = ?, unvetted = ? WHERE id = ?",
            (content, json.dumps(merged, ensure_ascii=False), updated, unvetted, twin.id),
        )
        text.remove(db, twin.id)
        text.add(db, twin.id, content, merged)
        changed = replace(twin, content=content, tags=merged, updated_at=updated)
        return replace(changed, unvetted=unvetted), True
    created = now if created is None else created
    tag_text = json.dumps(tags, ensure_ascii=False)
    ident = db.execute(
        "INSERT INTO memories (scope, content, tags, source, created_at, updated_at, "
        "embedding, unvetted) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (scope, content, tag_text, source, created, now, blob, unvetted),
    ).fetchall()[0][0]
    text.add(db, ident, content, tags)
    return Memory(ident, scope, content, tags, source, created, now, unvetted=unvetted), False


def _unembedded(
    db: sqlite3.Connection, scopes: tuple[str, ...], dim: int | None
) -> list[tuple[int, str]]:
    """Memories of `scopes` without an embedding of the current length, a batch of them."""
    marks = ",".join("?" * len(scopes))
    length = "" if dim is None else " OR (length(embedding) NOT IN (0, ?))"
    params = (*scopes, *(() if dim is None else (dim * 4,)), BACKFILL_BATCH)
    rows = db.execute(
        f"SELECT id, content FROM memories WHERE scope IN ({marks}) "
        f"AND (embedding IS NULL{length}) ORDER BY id DESC LIMIT ?",
        params,
    )
    return [(row[0], row[1]) for row in rows]
