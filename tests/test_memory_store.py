"""MemoryStore: what the store holds after each call, and what search finds in which scope;
the tests marked both_stores run on state.db and again on PostgreSQL (tests/memory_stores.py)."""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLM
from memory_stores import MemoryStores

from agent.model.side_calls import embed
from tools.memory.schema import index
from tools.memory.store import RECALL_THRESHOLD, MemoryStore

OWNER = "person:owner"
FACTS = [
    "The user's cat is called Miso.",
    "Favourite food: ramen with extra garlic.",
    "Works as a nurse on night shifts.",
    "Sister Hana's birthday is on 3 May.",
    "Prefers answers in short bullet points.",
    "우리 고양이 이름은 미소야",
    "내일 아침 7시에 치과 예약이 있어",
    "うちの猫はミソという名前です",
    "毎朝コーヒーを二杯飲む",
    "Loves 🍣 and 🍜, hates 🥦",
    "Geburtstagsfeier am Samstag im Garten",
]


ROWS = "SELECT id, scope, content FROM memories ORDER BY id"


def rows(db: Path, sql: str = ROWS) -> list:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
async def stores(
    tmp_path: Path, state_store: str | None, request: pytest.FixtureRequest
) -> AsyncIterator[MemoryStores]:
    def new_database() -> str:
        return str(request.getfixturevalue("postgres").new_database())

    opened = MemoryStores(tmp_path, state_store, new_database)
    yield opened
    await opened.close()


async def filled(stores: MemoryStores | Path, **kwargs: object) -> MemoryStore:
    if isinstance(stores, Path):
        stores = MemoryStores(stores, None)
    store = await stores.open(**kwargs)
    for fact in FACTS:
        await store.add(OWNER, fact)
    return store


async def best(store: MemoryStore, query: str, scopes: tuple[str, ...] = (OWNER,)) -> list:
    found = await store.search(scopes, query, limit=3, min_score=RECALL_THRESHOLD)
    return [m.content for m in found]


@pytest.mark.both_stores
async def test_the_best_match_comes_first_with_scores_in_0_1(stores: MemoryStores) -> None:
    store = await filled(stores)
    await store.add(OWNER, "The cat eats at 7 every morning.")
    found = await store.search([OWNER], "what is my cat called?", limit=5)
    assert [m.content for m in found] == [
        "The user's cat is called Miso.",
        "The cat eats at 7 every morning.",
    ]
    assert found[0].score == 1.0 and 0 < found[1].score < found[0].score
    assert await best(store, "cats") == [
        "The user's cat is called Miso.",
        "The cat eats at 7 every morning.",
    ]
    assert await best(store, "when is Hana's birthday?") == ["Sister Hana's birthday is on 3 May."]
    assert await best(store, "garlic") == ["Favourite food: ramen with extra garlic."]


@pytest.mark.both_stores
@pytest.mark.parametrize(
    "query",
    [
        "how's the weather tomorrow?",
        "tell me a joke",
        "What time is it?",
        "can you check the server logs?",
        "내일 날씨 어때?",
        "今日の天気は？",
        "🚗",
    ],
)
async def test_an_unrelated_question_finds_nothing_above_the_threshold(
    stores: MemoryStores, query: str
) -> None:
    store = await filled(stores)
    assert await best(store, query) == []


@pytest.mark.both_stores
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("고양이 이름이 뭐야?", "우리 고양이 이름은 미소야"),  # particles glued to the nouns
        ("치과 언제야?", "내일 아침 7시에 치과 예약이 있어"),
        ("猫の名前は？", "うちの猫はミソという名前です"),  # no spaces at all
        ("名前", "うちの猫はミソという名前です"),  # two characters inside a run
        ("猫", "うちの猫はミソという名前です"),  # one character
        ("コーヒー", "毎朝コーヒーを二杯飲む"),
        ("🍣", "Loves 🍣 and 🍜, hates 🥦"),
        ("Geburtstag", "Geburtstagsfeier am Samstag im Garten"),  # part of a compound: trigrams
    ],
)
async def test_korean_japanese_emoji_and_compounds_are_found(
    stores: MemoryStores, query: str, expected: str
) -> None:
    store = await filled(stores)
    assert await best(store, query) == [expected]


@pytest.mark.both_stores
async def test_almost_the_same_fact_updates_instead_of_duplicating(stores: MemoryStores) -> None:
    store = await stores.open()
    first, updated = await store.add(OWNER, "The user's cat is called Miso.", tags=["pets"])
    assert not updated
    same, updated = await store.add(OWNER, "the user's cat is called miso", tags=["cat"])
    assert updated and same.id == first.id and same.tags == ("pets", "cat")
    assert same.created_at == first.created_at and same.updated_at >= first.updated_at
    typo, updated = await store.add(OWNER, "The users cat is called Miso!")
    assert updated and typo.id == first.id
    assert not (await store.add(OWNER, "The user's dog is called Miso."))[1]
    assert not (await store.add("person:alice", "The users cat is called Miso!"))[1]
    await store.add(OWNER, "Meeting in room 12 at noon")
    assert not (await store.add(OWNER, "Meeting in room 14 at noon"))[1]  # a number changed
    assert stores.rows(ROWS) == [
        (1, OWNER, "The users cat is called Miso!"),
        (2, OWNER, "The user's dog is called Miso."),
        (3, "person:alice", "The users cat is called Miso!"),
        (4, OWNER, "Meeting in room 12 at noon"),
        (5, OWNER, "Meeting in room 14 at noon"),
    ]
    assert stores.rows("SELECT tags FROM memories WHERE id = 1") == [('["pets", "cat"]',)]


@pytest.mark.both_stores
async def test_forget_by_id_and_by_query(stores: MemoryStores) -> None:
    store = await stores.open()
    dentist, _ = await store.add(OWNER, "Dentist appointment on Monday")
    await store.add(OWNER, "Dentist is Dr. Kim on Main Street")
    piano, _ = await store.add(OWNER, "Piano lesson on Friday")
    other, _ = await store.add("person:alice", "Alice plays the piano")
    several = await store.forget([OWNER], query="dentist")
    assert several.deleted is None and {m.id for m in several.candidates} == {1, 2}
    gone = (await store.forget([OWNER], query="piano")).deleted  # Alice's is not seen
    assert gone is not None and (gone.id, gone.content) == (piano.id, piano.content)
    assert (await store.forget([OWNER], id=other.id)).deleted is None  # not in these scopes
    assert (await store.forget([OWNER], query="holiday")) == (await store.forget([OWNER], id=99))
    exact = await store.forget(None, query="Dentist appointment on Monday.")  # the owner: all
    assert exact.deleted is not None and exact.deleted.id == dentist.id
    with pytest.raises(ValueError, match="exactly one"):
        await store.forget([OWNER], id=2, query="dentist")
    assert stores.rows(ROWS) == [
        (2, OWNER, "Dentist is Dr. Kim on Main Street"),
        (4, "person:alice", "Alice plays the piano"),
    ]
    assert await store.get(2) is not None and await store.get(1) is None
    assert await best(store, "dentist appointment") == ["Dentist is Dr. Kim on Main Street"]
    if stores.url is None:  # the words index let go of the deleted memories too
        assert stores.rows("SELECT count(*) FROM memories_words") == [(2,)]


@pytest.mark.both_stores
async def test_scopes_are_kept_apart(stores: MemoryStores) -> None:
    store = await stores.open()
    await store.add("person:alice", "Alice's PIN hint is blue", tags=["secret-ish"])
    await store.add("group:telegram:-100:7", "The group meets on Thursdays")
    await store.add("person:bob", "Bob's PIN hint is green")
    assert await best(store, "PIN hint", ("person:alice",)) == ["Alice's PIN hint is blue"]
    assert await best(store, "PIN hint", ("person:carol",)) == []
    assert await store.search([], "PIN hint") == []
    seen = await best(store, "PIN hint meets", ("person:bob", "group:telegram:-100:7"))
    assert sorted(seen) == ["Bob's PIN hint is green", "The group meets on Thursdays"]
    assert [m.scope for m in await store.list(["person:bob"])] == ["person:bob"]
    assert [m.id for m in await store.list()] == [3, 2, 1]  # newest first
    assert await best(store, "secret-ish", ("person:alice",)) == ["Alice's PIN hint is blue"]


@pytest.mark.both_stores
async def test_memories_survive_reopening(stores: MemoryStores) -> None:
    await filled(stores)
    again = await stores.open()
    assert await best(again, "고양이 이름") == ["우리 고양이 이름은 미소야"]
    assert len(await again.list(limit=1000)) == len(FACTS)


async def test_fifty_concurrent_stores_lose_nothing(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "state.db")
    other = sqlite3.connect(tmp_path / "state.db", timeout=10, check_same_thread=False)
    other.execute("CREATE TABLE IF NOT EXISTS sessions_like (n INTEGER)")

    async def elsewhere() -> None:  # another part of pinclaw writing state.db meanwhile
        for n in range(20):
            await asyncio.to_thread(
                lambda n=n: (
                    other.execute("INSERT INTO sessions_like VALUES (?)", (n,)),
                    other.commit(),
                )
            )

    results = await asyncio.gather(
        *(store.add(OWNER, f"Fact number {n}: item{n} is kept") for n in range(50)), elsewhere()
    )
    added = results[:50]
    assert sorted(m.id for m, updated in added if not updated) == list(range(1, 51))  # type: ignore[union-attr]
    assert len(rows(tmp_path / "state.db")) == 50
    assert other.execute("SELECT count(*) FROM sessions_like").fetchone() == (20,)
    assert await best(store, "item37") == ["Fact number 37: item37 is kept"]
    same = await asyncio.gather(*(store.add(OWNER, "Parks the car on level 3") for _ in range(10)))
    assert [updated for _, updated in same].count(False) == 1 and len({m.id for m, _ in same}) == 1


async def test_the_kept_connection_sees_other_writers_and_holds_no_lock(tmp_path: Path) -> None:
    """The store keeps its connection between calls: what another process commits meanwhile
    is found by the next search, and between calls the store holds no lock on the file."""
    store = await filled(tmp_path)
    assert await best(store, "cello") == []
    other = sqlite3.connect(tmp_path / "state.db", timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # would fail at once if the store held the write lock
    other.execute(
        "INSERT INTO memories (scope, content, tags, source, created_at, updated_at)"
        " VALUES (?, 'Plays the cello', '[]', 'tool', 1.0, 1.0)",
        (OWNER,),
    )
    ident = other.execute("SELECT last_insert_rowid()").fetchone()[0]
    index(other, ident, "Plays the cello", [])  # as another process's store does
    other.execute("COMMIT")
    assert await best(store, "cello") == ["Plays the cello"]
    other.execute("BEGIN IMMEDIATE")
    other.execute("COMMIT")
    other.close()
    await store.close()  # closing lets go of the file; a later call opens it again
    assert await best(store, "cello") == ["Plays the cello"]


@pytest.mark.both_stores
async def test_what_one_process_stores_another_finds_and_a_twin_stays_one(
    stores: MemoryStores,
) -> None:
    """Two stores with connections of their own, as the daemon and `agent memory` have: what
    one commits, the other's next call finds; the same fact stored by both at once is one
    memory (on PostgreSQL, where nothing else would keep their twin checks apart)."""
    daemon, terminal = await stores.open(), await stores.open()
    assert await best(terminal, "cello") == []
    await daemon.add(OWNER, "Plays the cello on Sundays", tags=["music"])
    assert await best(terminal, "cello") == ["Plays the cello on Sundays"]
    assert await best(terminal, "music", (OWNER, "person:alice")) == ["Plays the cello on Sundays"]
    assert await best(terminal, "Sunday", ("person:alice",)) == []
    both = (daemon, terminal) * 10
    same = await asyncio.gather(*(s.add(OWNER, "Parks the car on level 3") for s in both))
    assert [updated for _, updated in same].count(False) == 1 and len({m.id for m, _ in same}) == 1
    assert (await terminal.forget([OWNER], query="cello")).deleted is not None
    assert await best(daemon, "cello") == [] and await best(daemon, "level 3") == [
        "Parks the car on level 3"
    ]
    assert stores.rows(ROWS) == [(2, OWNER, "Parks the car on level 3")]


OLD_SCHEMA = """
CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, chat_key TEXT NOT NULL,
    content TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX memories_by_chat ON memories (chat_key, id);
"""


async def test_the_old_table_is_migrated_with_nothing_lost(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(OLD_SCHEMA)
        conn.executemany(
            "INSERT INTO memories (chat_key, content, created_at) VALUES (?, ?, ?)",
            [
                ("telegram:1:", "The cat is called Miso.", 1000.0),
                ("telegram:2:", "우리 고양이 이름은 미소야", 2000.0),
                ("telegram:1:", "Favourite food: ramen.", 3000.0),
            ],
        )
        conn.execute("DELETE FROM memories WHERE id = 3")
        conn.execute(
            "INSERT INTO memories (chat_key, content, created_at) VALUES "
            "('discord:9:', 'Plays the cello', 4000.0)"
        )
    store = MemoryStore(db, legacy_scope=lambda key: f"person:{key.split(':')[1]}")
    assert [
        (m.id, m.scope, m.content, m.created_at, m.updated_at, m.tags)
        for m in reversed(await store.list())
    ] == [
        (1, "person:1", "The cat is called Miso.", 1000.0, 1000.0, ()),
        (2, "person:2", "우리 고양이 이름은 미소야", 2000.0, 2000.0, ()),
        (4, "person:9", "Plays the cello", 4000.0, 4000.0, ()),
    ]
    assert await best(store, "고양이", ("person:2",)) == ["우리 고양이 이름은 미소야"]
    new, _ = await store.add("person:1", "Likes green tea")
    assert new.id == 5  # ids are never reused
    default = MemoryStore(db)  # a second open finds the new shape and changes nothing
    assert len(await default.list()) == 4
    tables = {r[0] for r in rows(db, "SELECT name FROM sqlite_master")}
    assert "memories_legacy" not in tables and "memories_by_chat" not in tables


@pytest.mark.both_stores
async def test_export_then_import_round_trips_and_twice_adds_nothing(
    stores: MemoryStores,
) -> None:
    source = await filled(stores)
    await source.add("person:alice", "Alice likes jazz", tags=["music"])
    exported = await source.export()
    assert exported[-1]["scope"] == "person:alice" and exported[-1]["tags"] == ["music"]
    assert exported[0]["created_at"].endswith("+00:00")
    target = await stores.open("other.db")
    assert await target.import_rows(exported) == len(FACTS) + 1
    assert await target.import_rows(exported) == 0
    again = await target.export()
    keys = ("scope", "content", "tags", "created_at", "updated_at")
    assert [{k: r[k] for k in keys} for r in again] == [{k: r[k] for k in keys} for r in exported]
    assert {r["source"] for r in again} == {"import"}
    repeated = [
        {"scope": "a", "content": "Parks on level 3", "tags": ["car"]},
        {"scope": "a", "content": "parks on level 3.", "tags": ["parking"]},
    ]
    assert await target.import_rows(repeated) == 1
    [row] = await target.export(["a"])
    assert (row["content"], row["tags"]) == ("parks on level 3.", ["car", "parking"])
    with pytest.raises(ValueError, match="row 2: content: missing or empty"):
        await target.import_rows([{"scope": "b", "content": "ok"}, {"scope": "b"}])
    assert len(await target.export(["b"])) == 0


SLOW_START_S = 60.0  # the first embedding imports LiteLLM: seconds on a busy machine


def fake_embedder(fake: FakeLLM) -> functools.partial:  # type: ignore[type-arg]
    return functools.partial(
        embed, model="openai/test-embed", api_base=fake.base_url, api_key="sk-test-not-real"
    )


@pytest.mark.both_stores
async def test_a_paraphrase_is_found_by_meaning_where_words_miss(
    stores: MemoryStores, fake_llm: FakeLLM
) -> None:
    hybrid = await stores.open(embed=fake_embedder(fake_llm), embed_timeout_s=SLOW_START_S)
    await hybrid.add(OWNER, "The user's kitten adores salmon.")
    await hybrid.add(OWNER, "Works as a nurse on night shifts.")
    words_only = await stores.open()
    question = "what food does my cat like?"
    assert await best(words_only, question) == []
    found = await hybrid.search([OWNER], question, limit=3, min_score=RECALL_THRESHOLD)
    assert [m.content for m in found] == ["The user's kitten adores salmon."]
    assert 0.5 < found[0].score < 0.8
    assert await best(hybrid, "how's the weather tomorrow?") == []
    assert await best(hybrid, "night shifts") == ["Works as a nurse on night shifts."]
    assert fake_llm.embedding_inputs[0] == ["The user's kitten adores salmon."]


@pytest.mark.both_stores
async def test_memories_stored_without_embeddings_get_them_at_search(
    stores: MemoryStores, fake_llm: FakeLLM
) -> None:
    await filled(stores)
    unembedded = "SELECT count(*) FROM memories WHERE embedding IS NULL"
    assert stores.rows(unembedded) == [(len(FACTS),)]
    hybrid = await stores.open(embed=fake_embedder(fake_llm), embed_timeout_s=SLOW_START_S)
    assert sorted(await best(hybrid, "my feline's name")) == [
        "The user's cat is called Miso.",
        "うちの猫はミソという名前です",
        "우리 고양이 이름은 미소야",
    ]
    assert stores.rows(unembedded) == [(0,)]
    assert fake_llm.embedding_inputs[0][0] == "my feline's name"


async def test_an_embedding_outage_falls_back_to_words_with_one_log_line(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.embeddings_status = 503
    hybrid = MemoryStore(tmp_path / "state.db", embed=fake_embedder(fake_llm))
    with caplog.at_level(logging.WARNING, logger="tools.memory.store"):
        stored, _ = await hybrid.add(OWNER, "The user's kitten adores salmon.")
        found = await best(hybrid, "kitten")
    assert found == ["The user's kitten adores salmon."]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2 and all("searching by words only" in w for w in warnings)
    assert rows(tmp_path / "state.db", "SELECT embedding FROM memories") == [(None,)]
    fake_llm.embeddings_status = None  # back: the next search embeds what was missed
    assert await best(hybrid, "what food does my cat like?") == [stored.content]

    async def hangs(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(30)
        return []

    slow = MemoryStore(tmp_path / "state.db", embed=hangs, embed_timeout_s=0.2)
    assert await best(slow, "kitten") == [stored.content]
