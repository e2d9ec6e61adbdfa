"""Memory tools: what is stored in the state database, what comes back, per chat."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tools.base import ToolCallContext, ToolResult
from tools.config import MemorySettings
from tools.memory import MemoryTools


def memory(tmp_path: Path) -> dict[str, object]:
    tools = MemoryTools(tmp_path / "state.db", MemorySettings(max_recall=2)).tools()
    return {tool.name: tool for tool in tools}


async def call(tmp_path: Path, name: str, chat: str = "telegram:1:", **args: object
               ) -> ToolResult:
    tool = memory(tmp_path)[name]
    return await tool.run(args, ToolCallContext(tmp_path, chat_key=chat))  # type: ignore[attr-defined,no-any-return]


async def test_store_recall_forget(tmp_path: Path) -> None:
    assert (await call(tmp_path, "memory_store", content="The cat is called Miso.")).ok
    await call(tmp_path, "memory_store", content="Favourite food: ramen.")
    await call(tmp_path, "memory_store", content="The cat eats at 7.")
    recalled = await call(tmp_path, "memory_recall", query="what is the cat called?")
    lines = recalled.output.splitlines()
    assert len(lines) == 2  # max_recall
    assert lines[0].startswith("#1 (") and lines[0].endswith("The cat is called Miso.")
    assert "ramen" not in recalled.output
    assert (await call(tmp_path, "memory_forget", memory_id=1)).ok
    with sqlite3.connect(tmp_path / "state.db") as db:
        rows = db.execute("SELECT id, content FROM memories ORDER BY id").fetchall()
    assert rows == [(2, "Favourite food: ramen."), (3, "The cat eats at 7.")]


async def test_memories_stay_in_their_chat(tmp_path: Path) -> None:
    await call(tmp_path, "memory_store", chat="telegram:1:", content="Alice's PIN hint: blue")
    other = await call(tmp_path, "memory_recall", chat="telegram:2:", query="PIN hint")
    forget = await call(tmp_path, "memory_forget", chat="telegram:2:", memory_id=1)
    assert other.output.startswith("No memory matches")
    assert not forget.ok and "No memory #1 in this chat" in forget.output


async def test_empty_or_huge_content_refused(tmp_path: Path) -> None:
    assert not (await call(tmp_path, "memory_store", content="  ")).ok
    huge = await call(tmp_path, "memory_store", content="x" * 5000)
    assert not huge.ok and "under 2000" in huge.output
