"""The memory store at size: recall latency at 1k / 10k / 100k memories, by words (BM25) and
hybrid (words + embeddings), and how fast memories are stored.

    .venv/bin/python bench/memory.py [--sizes 1000 10000 100000] [--queries 300] [--postgres]

The memories are generated personal facts (names, foods, places, times; a tenth in Korean
or Japanese) spread over 20 scopes; a recall searches two of them (a person and a group),
as auto-recall does, with a question of one of three kinds: words of a stored fact, a
chatty message mentioning one thing, or something unrelated. Hybrid uses the fake LLM's
deterministic 256-dimension embedder in this process (no HTTP), and a 1,536-dimension one
(the size of text-embedding-3-small) to show what a real model's vectors cost to scan.
With --postgres the memories are in a throw-away PostgreSQL cluster (tests/postgres_cluster.py,
a database per size) instead of state.db: the same recall, through tsvector and pg_trgm.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakes.llm_embeddings import embed_text  # noqa: E402
from memory_stores import MemoryStores  # noqa: E402
from postgres_cluster import PostgresCluster, server_bin  # noqa: E402

from tools.memory.store import RECALL_THRESHOLD, Embedder, MemoryStore  # noqa: E402
from tools.memory.vectors import pack  # noqa: E402


def words(text: str) -> list[str]:
    return text.split()


NAMES = words("Hana Miso Tofu Ken Yuna Minji Sora Riku Aiko Jonas Lena Omar Priya Mateo Zoe")
THINGS = words(
    "ramen sushi kimchi pasta coffee tea jazz piano guitar cello tennis chess hiking yoga "
    "dentist doctor gym office garden bakery library museum beach river train bus bike car "
    "laptop phone camera novel podcast movie recipe soup curry salad cake bread wine beer"
)
PLACES = words("Seoul Tokyo Berlin Lisbon Oslo Busan Osaka Paris Rome Vienna Prague Madrid")
DAYS = words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
KO = ["고양이 이름은 {n}야", "{n}는 매주 {d}에 치과에 가", "좋아하는 음식은 김치찌개",
      "{n}의 생일은 5월"]  # fmt: skip
JA = ["猫の名前は{n}です", "毎朝コーヒーを飲む", "{n}は東京に住んでいる", "週末は公園で散歩する"]
TEMPLATES = [
    "{n} likes {t} and {u}",
    "{n}'s favourite {t} place is in {p}",
    "Meeting {n} every {d} at {h}:00 about {t}",
    "The {t} appointment is on {d} in {p}",
    "{n} is allergic to {t}",
    "Bought a new {t} for the {u} trip to {p}",
    "{n} plays {t} on {d}s with {m}",
    "Remember to bring the {t} to {p} on {d}",
]
CHATTY = [
    "hey, I'm thinking about {t} tonight, any ideas?",
    "can you remind me what we said about {n}?",
    "I'm going to {p} next week, what should I pack?",
]
UNRELATED = ["how's the weather today?", "tell me a joke", "what time is it in London?",
             "summarise this article for me please", "write a haiku about autumn"]  # fmt: skip


def fact(rng: random.Random) -> str:
    fill: dict[str, Any] = {
        "n": rng.choice(NAMES), "m": rng.choice(NAMES), "t": rng.choice(THINGS),
        "u": rng.choice(THINGS), "p": rng.choice(PLACES), "d": rng.choice(DAYS),
        "h": rng.randint(6, 21),
    }  # fmt: skip
    roll = rng.random()
    pool = KO if roll < 0.05 else JA if roll < 0.1 else TEMPLATES
    return rng.choice(pool).format(**fill) + f" (note {rng.randint(1, 10**6)})"


def question(rng: random.Random, facts: list[str]) -> str:
    kind = rng.random()
    if kind < 0.4:
        words = rng.choice(facts).split()
        return " ".join(rng.sample(words, min(3, len(words))))
    if kind < 0.8:
        fill = {"t": rng.choice(THINGS), "n": rng.choice(NAMES), "p": rng.choice(PLACES)}
        return rng.choice(CHATTY).format(**fill)
    return rng.choice(UNRELATED)


def scope(i: int) -> str:
    return f"person:p{i % 15}" if i % 4 else f"group:g{i % 5}"


def fake_embedder() -> Embedder:
    async def embed(texts: list[str]) -> list[list[float]]:
        return [embed_text(t) for t in texts]

    return embed


def wide_embedder(dims: int = 1536) -> Embedder:
    """Deterministic vectors of a real model's size (their meaning is not the point)."""

    def vector(text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        rng = random.Random(seed)
        return [rng.uniform(-1, 1) for _ in range(dims)]

    async def embed(texts: list[str]) -> list[list[float]]:
        return [vector(t) for t in texts]

    return embed


async def build(stores: MemoryStores, size: int, rng: random.Random) -> tuple[list[str], float]:
    """`size` memories through import_rows (one transaction); returns facts, rows/s."""
    facts = [fact(rng) for _ in range(size)]
    rows = [{"scope": scope(i), "content": text} for i, text in enumerate(facts)]
    store = await stores.open()
    started = time.perf_counter()
    await store.import_rows(rows)
    return facts, size / (time.perf_counter() - started)


async def fill_embeddings(stores: MemoryStores, embedder: Embedder) -> None:
    rows = stores.rows("SELECT id, content FROM memories")
    vectors = await embedder([content for _, content in rows])
    filled = [(pack(v), ident) for (ident, _), v in zip(rows, vectors, strict=True)]
    stores.write("UPDATE memories SET embedding = ? WHERE id = ?", filled)


async def recall(store: MemoryStore, queries: list[str]) -> tuple[float, float, float]:
    """p50 and p99 of one search in ms, and the share of searches that found something."""
    times, hits = [], 0
    for i, text in enumerate(queries):
        scopes = (f"person:p{i % 15}", f"group:g{i % 5}")
        started = time.perf_counter()
        found = await store.search(scopes, text, limit=3, min_score=RECALL_THRESHOLD)
        times.append((time.perf_counter() - started) * 1000)
        hits += bool(found)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return statistics.median(times), p99, hits / len(queries)


async def throughput(
    stores: MemoryStores, rng: random.Random, count: int = 300
) -> tuple[float, float]:
    """add() per second, one after another and 50 at a time (each add is one commit)."""
    store = await stores.open()
    started = time.perf_counter()
    for _ in range(count):
        await store.add("person:bench", fact(rng))
    sequential = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(count // 50):
        await asyncio.gather(*(store.add("person:bench", fact(rng)) for _ in range(50)))
    concurrent = (count // 50 * 50) / (time.perf_counter() - started)
    return sequential, concurrent


async def one_size(stores: MemoryStores, size: int, queries: int, hybrid_max: int) -> None:
    rng = random.Random(size)
    facts, rate = await build(stores, size, rng)
    if stores.url is not None:  # what autovacuum does within a minute of a large import
        stores.write("ANALYZE memories", [()])
    asked = [question(rng, facts) for _ in range(queries)]
    p50, p99, found = await recall(await stores.open(), asked)
    words = "words (BM25)" if stores.url is None else "words (ts_rank)"
    print(f"{size:>9} {words:<16} {p50:>8.2f} {p99:>8.2f} {found:>6.0%}")
    modes = [("hybrid, 256-d", fake_embedder()), ("hybrid, 1536-d", wide_embedder())]
    for mode, embedder in modes if size <= hybrid_max else []:
        await fill_embeddings(stores, embedder)
        p50, p99, found = await recall(await stores.open(embed=embedder), asked)
        print(f"{size:>9} {mode:<16} {p50:>8.2f} {p99:>8.2f} {found:>6.0%}")
    print(f"{'':>9} import_rows: {rate:,.0f} memories/s")


async def run(args: argparse.Namespace, folder: Path, cluster: PostgresCluster | None) -> None:
    def place(name: str) -> MemoryStores:
        url = cluster.new_database() if cluster is not None else None
        return MemoryStores(folder / name, url)

    print(f"{'memories':>9} {'mode':<16} {'p50 ms':>8} {'p99 ms':>8} {'found':>6}")
    for size in args.sizes:
        stores = place(f"size{size}")
        await one_size(stores, size, args.queries, args.hybrid_max)
        await stores.close()
    stores = place("adds")
    sequential, concurrent = await throughput(stores, random.Random(1))
    await stores.close()
    print(f"add(): {sequential:,.0f}/s one at a time, {concurrent:,.0f}/s 50 at once")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--hybrid-max", type=int, default=10000, help="largest hybrid size")
    parser.add_argument("--postgres", action="store_true", help="in PostgreSQL, not state.db")
    args = parser.parse_args()
    bindir = server_bin() if args.postgres else None
    if args.postgres and bindir is None:
        parser.error("--postgres needs PostgreSQL's server programs (initdb, pg_ctl)")
    cluster = PostgresCluster(bindir).start() if bindir is not None else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in (f"size{size}" for size in args.sizes):
                (Path(tmp) / name).mkdir()
            (Path(tmp) / "adds").mkdir()
            asyncio.run(run(args, Path(tmp), cluster))
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
