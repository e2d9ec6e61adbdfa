"""The session store: what is kept per chat, and history cut only between turns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.turns.sessions import SessionStore


def turn(n: int, tools: int = 0) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [{"role": "user", "content": f"question {n}"}]
    for t in range(tools):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{n}{t}", "type": "function",
                 "function": {"name": "shell", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{n}{t}", "content": "ok"},
        ]
    return [*messages, {"role": "assistant", "content": f"answer {n}"}]


async def test_history_is_cut_at_a_turn_boundary(tmp_path: Path) -> None:
    store = await SessionStore(tmp_path / "state.db").open()
    await store.append_turn("t:1:", turn(1, tools=2))
    await store.append_turn("t:1:", turn(2, tools=1))
    await store.append_turn("t:1:", turn(3))
    # turn 1 has 6 messages, turn 2 has 4, turn 3 has 2
    history = await store.history("t:1:", max_messages=7)
    assert history[0]["content"] == "question 2" and len(history) == 6
    # the last 5 start inside turn 2: its remainder is dropped, no tool result orphaned
    history = await store.history("t:1:", max_messages=5)
    assert [m["content"] for m in history] == ["question 3", "answer 3"]
    full = await store.history("t:1:", max_messages=100)
    assert len(full) == 6 + 4 + 2 and full[0]["content"] == "question 1"
    await store.close()


async def test_chats_are_separate_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = await SessionStore(path).open()
    await store.append_turn("telegram:1:", turn(1))
    await store.append_turn("telegram:2:", turn(2))
    await store.close()
    reopened = await SessionStore(path).open()
    assert [m["content"] for m in await reopened.history("telegram:1:", 10)] == [
        "question 1", "answer 1"]
    await reopened.new_session("telegram:1:")
    assert await reopened.history("telegram:1:", 10) == []
    assert await reopened.count("telegram:2:") == 2
    await reopened.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = db.execute("SELECT role, created_at > 0 FROM messages ORDER BY id").fetchall()
    assert rows == [("user", 1), ("assistant", 1), ("user", 1), ("assistant", 1)]
