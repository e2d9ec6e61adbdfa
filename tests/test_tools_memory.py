"""Memory tools: what is stored in the state database, what comes back, in whose scope."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tools.base import ToolCallContext, ToolResult, read_only
from tools.config import MemorySettings
from tools.memory.memory_tools import MemoryTools


def memory(tmp_path: Path) -> dict[str, object]:
    tools = MemoryTools(tmp_path / "state.db", MemorySettings(max_recall=2)).tools()
    return {tool.name: tool for tool in tools}


async def call(
    tmp_path: Path,
    name: str,
    chat: str = "telegram:1:",
    *,
    scope: str = "",
    recall: tuple[str, ...] = (),
    **args: object,
) -> ToolResult:
    tool = memory(tmp_path)[name]
    context = ToolCallContext(tmp_path, chat_key=chat, memory_scope=scope, recall_scopes=recall)
    return await tool.run(args, context)  # type: ignore[attr-defined,no-any-return]


def rows(tmp_path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(tmp_path / "state.db") as db:
        return db.execute("SELECT id, scope, content, tags FROM memories ORDER BY id").fetchall()


async def test_store_recall_forget(tmp_path: Path) -> None:
    assert (
        await call(tmp_path, "memory_store", content="The cat is called Miso.", tags=["pets"])
    ).ok
    await call(tmp_path, "memory_store", content="Favourite food: ramen.")
    await call(tmp_path, "memory_store", content="The cat eats at 7.")
    recalled = await call(tmp_path, "memory_recall", query="what is the cat called?")
    lines = recalled.output.splitlines()
    assert len(lines) == 2  # max_recall
    assert lines[0].startswith("#1 (") and lines[0].endswith("[pets]: The cat is called Miso.")
    assert "ramen" not in recalled.output
    assert (await call(tmp_path, "memory_forget", id=1)).output == (
        "Forgot memory #1: The cat is called Miso."
    )
    assert rows(tmp_path) == [
        (2, "chat:telegram:1:", "Favourite food: ramen.", "[]"),
        (3, "chat:telegram:1:", "The cat eats at 7.", "[]"),
    ]


async def test_storing_almost_the_same_fact_updates_it(tmp_path: Path) -> None:
    first = await call(tmp_path, "memory_store", content="The cat is called Miso.")
    again = await call(tmp_path, "memory_store", content="the cat is called Miso", tags=["cat"])
    assert first.output == "Remembered as memory #1."
    assert again.output == "Updated memory #1 (it said almost the same)."
    assert rows(tmp_path) == [(1, "chat:telegram:1:", "the cat is called Miso", '["cat"]')]


async def test_writes_go_to_the_calls_scope_and_reads_see_its_recall_scopes(
    tmp_path: Path,
) -> None:
    await call(
        tmp_path,
        "memory_store",
        scope="person:alice",
        recall=("person:alice",),
        content="Alice's cat is called Miso",
    )
    await call(
        tmp_path,
        "memory_store",
        scope="group:telegram:-100:7",
        recall=("group:telegram:-100:7",),
        content="The group's cat is called Tofu",
    )
    assert [r[1] for r in rows(tmp_path)] == ["person:alice", "group:telegram:-100:7"]
    both = await call(
        tmp_path,
        "memory_recall",
        scope="person:alice",
        recall=("person:alice", "group:telegram:-100:7"),
        query="cat",
    )
    alone = await call(
        tmp_path, "memory_recall", scope="person:bob", recall=("person:bob",), query="cat"
    )
    assert "Miso" in both.output and "Tofu" in both.output
    assert alone.output == "No memory matches 'cat'."
    refused = await call(
        tmp_path, "memory_forget", scope="person:bob", recall=("person:bob",), id=1
    )
    assert not refused.ok and "No memory #1 here" in refused.output
    assert len(rows(tmp_path)) == 2


async def test_memories_stay_in_their_chat_without_a_scope(tmp_path: Path) -> None:
    await call(tmp_path, "memory_store", chat="telegram:1:", content="Alice's PIN hint: blue")
    other = await call(tmp_path, "memory_recall", chat="telegram:2:", query="PIN hint")
    forget = await call(tmp_path, "memory_forget", chat="telegram:2:", id=1)
    assert other.output.startswith("No memory matches")
    assert not forget.ok and "No memory #1 here" in forget.output


async def test_forget_by_words_asks_which_when_several_match(tmp_path: Path) -> None:
    await call(tmp_path, "memory_store", content="Dentist appointment on Monday")
    await call(tmp_path, "memory_store", content="Dentist is Dr. Kim on Main Street")
    await call(tmp_path, "memory_store", content="Piano lesson on Friday")
    several = await call(tmp_path, "memory_forget", query="dentist")
    assert several.ok and several.output.startswith("Several memories match 'dentist'")
    assert "#1 (" in several.output and "#2 (" in several.output and "Piano" not in several.output
    assert len(rows(tmp_path)) == 3
    one = await call(tmp_path, "memory_forget", query="piano lesson")
    assert one.output == "Forgot memory #3: Piano lesson on Friday"
    none = await call(tmp_path, "memory_forget", query="holiday plans")
    assert not none.ok and "No memory matches" in none.output
    # The memory group's `text` comes with an id too (tools/tool_groups.py): the id decides.
    both = await call(tmp_path, "memory_forget", id=1, query="piano")
    assert both.output == "Forgot memory #1: Dentist appointment on Monday"
    assert [r[0] for r in rows(tmp_path)] == [2]
    neither = await call(tmp_path, "memory_forget", query=" ")
    assert not neither.ok and neither.output == "give the memory's id, or words from it"


async def test_empty_or_huge_content_refused(tmp_path: Path) -> None:
    assert not (await call(tmp_path, "memory_store", content="  ")).ok
    huge = await call(tmp_path, "memory_store", content="x" * 5000)
    assert not huge.ok and "under 2000" in huge.output
    assert not (tmp_path / "state.db").exists() or rows(tmp_path) == []


async def test_read_only_offers_recall_but_refuses_store_and_forget(tmp_path: Path) -> None:
    tools = {t.name: t for t in read_only(MemoryTools(tmp_path / "m.db", MemorySettings()).tools())}
    context = ToolCallContext(tmp_path, chat_key="c")
    stored = await tools["memory_store"].run({"content": "x is y"}, context)
    forgot = await tools["memory_forget"].run({"id": 1}, context)
    recalled = await tools["memory_recall"].run({"query": "x"}, context)
    assert "read_only" in stored.output and "read_only" in forgot.output
    assert recalled.ok and recalled.output == "No memory matches 'x'."


async def test_forgetting_a_memory_by_an_id_too_large_for_sqlite_says_there_is_none(
    tmp_path: Path,
) -> None:
    """memory_forget(id=2**63): SQLite's integers stop at 2**63 - 1, so the store raised
    OverflowError and the model read "memory_forget failed: OverflowError: Python int too
    large to convert to SQLite INTEGER" instead of the line every other missing id gets."""
    memory = MemoryTools(tmp_path / "state.db", MemorySettings())
    forget = {tool.name: tool for tool in memory.tools()}["memory_forget"]
    context = ToolCallContext(tmp_path, chat_key="toy:alice:")
    try:
        missing = await forget.run({"id": 12}, context)
        huge = await forget.run({"id": 2**63}, context)
        assert (
            await memory.store.vet(2**63) is None and await memory.store.get(-(2**63) - 1) is None
        )
    finally:
        await memory.store.close()
    assert missing.output == "No memory #12 here; recall by words to find its number"
    assert (huge.ok, huge.output) == (
        False,
        f"No memory #{2**63} here; recall by words to find its number",
    )
