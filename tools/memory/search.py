"""Finding memories by their words: candidates from the store's text search, scored in [0, 1].

The score of a memory for a question is the larger of two shares:

- how much of the question it answers: the weight of the question's terms the memory holds
  over the weight of all of them, each term weighted by its rarity among all memories
  (inverse document frequency: "miso" counts more than "cat" when many memories are about
  the cat);
- how much of the memory the question touches: the share of the memory's own terms that the
  question holds (so "the cat is called Miso" still surfaces for a long message that
  mentions the cat once).

0 means no word in common (after function words are dropped), 1 that one holds all of the
other. A term the words index does not know as a whole word ("birth", a compound, a script
without spaces) counts as held when it is a substring of the memory: that is what the
trigram index finds.

The candidates come from the store's text search (text_index.py: FTS5 on state.db, a
tsvector and pg_trgm on PostgreSQL); the scores are computed here, the same on both.
BM25 (ts_rank on PostgreSQL) picks the candidates and breaks ties, over the rarest terms of
the question while their memories number RANK_BUDGET or fewer. A more common term is not
ranked (that would read its whole posting list): the newest memories holding it are its
candidates, and its rarity weight is small anyway. This keeps a recall over 100,000 memories within
milliseconds (bench/memory.py).
"""

from __future__ import annotations

import json
import math
import sqlite3
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from tools.memory.rows import Memory, from_row
from tools.memory.schema import COLUMNS, searchable
from tools.memory.text import content_terms, index_terms, near_duplicate, query_terms
from tools.memory.text_index import TextIndex

PROBE_CAP = 2_000  # count a term's memories up to this many; past it, the term is common
RANK_BUDGET = 5_000  # postings BM25 ranks per search at most; other terms: newest first


@dataclass(frozen=True)
class Hit:
    id: int
    score: float


@dataclass(frozen=True)
class _Question:
    weights: dict[str, float]  # term -> rarity weight
    unknown: frozenset[str]  # terms no memory holds as a whole word
    words: frozenset[str]  # every term of the question, for the memory's share

    def score(self, text: str) -> float:
        tokens = set(index_terms(text))
        folded = unicodedata.normalize("NFKC", text).casefold()
        total = sum(self.weights.values())
        held = sum(
            weight
            for term, weight in self.weights.items()
            if term in tokens or (term in self.unknown and term in folded)
        )
        own = content_terms(text)
        touched = sum(1 for term in own if term in self.words) / len(own) if own else 0.0
        return max(held / total if total else 0.0, touched)


def lexical(
    db: sqlite3.Connection, text: TextIndex, scopes: Sequence[str] | None, query: str, *, k: int
) -> list[Hit]:
    """Up to `k` memories of `scopes` (None: all) sharing words with `query`, best first,
    each with its score (> 0)."""
    terms = query_terms(query)
    if not terms or (scopes is not None and not scopes):
        return []
    total = db.execute("SELECT max(id) FROM memories").fetchone()[0] or 0  # ~ the count
    counts = {term: text.count(db, term, PROBE_CAP) for term in terms}
    rarity = {t: math.log(1 + (total + 1) / (counts[t] + 0.5)) for t in terms}
    question = _Question(
        weights={t: share * rarity[t] for t, share in terms.items()},
        unknown=frozenset(t for t in terms if counts[t] == 0 and len(t) >= 3),
        words=frozenset(index_terms(query)),
    )
    rare: list[str] = []  # ranked by BM25, rarest first, within RANK_BUDGET postings
    for term in sorted((t for t in terms if 0 < counts[t] < PROBE_CAP), key=counts.__getitem__):
        if rare and sum(counts[t] for t in rare) + counts[term] > RANK_BUDGET:
            break
        rare.append(term)
    common = [t for t in terms if counts[t] > 0 and t not in rare]
    ranked = text.words(db, rare, scopes, k, ranked=True) if rare else []
    found = dict.fromkeys(ranked)
    if common and len(found) < k:
        found.update(dict.fromkeys(text.words(db, common, scopes, k, ranked=False)))
    if question.unknown:
        found.update(dict.fromkeys(text.substrings(db, sorted(question.unknown), scopes, k)))
    if not found:
        return []
    marks = ",".join("?" * len(found))
    rows = db.execute(
        f"SELECT id, content, tags FROM memories WHERE id IN ({marks})", tuple(found)
    ).fetchall()
    position = {ident: i for i, ident in enumerate(ranked)}
    scored = [
        (question.score(searchable(content, json.loads(tags))), ident)
        for ident, content, tags in rows
    ]
    scored.sort(key=lambda s: (-s[0], position.get(s[1], len(position)), -s[1]))
    return [Hit(ident, score) for score, ident in scored[:k] if score > 0]


def twin(db: sqlite3.Connection, text: TextIndex, scope: str, content: str) -> Memory | None:
    """A memory of `scope` that `content` only rewords (near_duplicate), if there is one:
    among the best word matches, or (a text of function words only) the same text."""
    ids = [hit.id for hit in lexical(db, text, [scope], content, k=5)]
    if not ids and not query_terms(content) and len(content) >= 3:
        ids = text.substrings(db, [content], [scope], 5)
    for ident in ids:
        row = db.execute(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (ident,)).fetchone()
        if row is not None and near_duplicate(row[2], content):
            return from_row(row)
    return None
