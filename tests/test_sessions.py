"""The session store: what is kept per chat, and history cut only between turns."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from agent.app import open_store
from agent.conversation.compaction import history_for
from agent.durable.outbox import PartOutcome
from agent.durable.sessions import SessionStore
from agent.durable.store import Store
from channels.base import ChatRef, OutgoingPart

pytestmark = pytest.mark.both_stores


def turn(n: int, tools: int = 0) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [{"role": "user", "content": f"question {n}"}]
    for t in range(tools):
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{n}{t}",
                        "type": "function",
                        "function": {"name": "shell", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{n}{t}", "content": "ok"},
        ]
    return [*messages, {"role": "assistant", "content": f"answer {n}"}]


async def stored(sessions: SessionStore, chat_key: str) -> list[object]:
    """What the chat's next turn reads back: every message of its session's turns."""
    recent = await sessions.recent(chat_key)
    return [m["content"] for t in recent.turns for m in t.messages]


async def test_history_is_cut_at_a_turn_boundary(tmp_path: Path, state_store: str | None) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    sessions = store.sessions
    await sessions.append_turn("t:1:", turn(1, tools=2))
    await sessions.append_turn("t:1:", turn(2, tools=1))
    await sessions.append_turn("t:1:", turn(3))
    # turn 1 has 6 messages, turn 2 has 4, turn 3 has 2
    full = await history_for(
        sessions, "t:1:", max_messages=100, budget_tokens=100_000, summarise=None
    )
    assert len(full) == 6 + 4 + 2 and full[0]["content"] == "question 1"
    # over the count, the newest whole turns within half of it (5) stay: the last 5 messages
    # start inside turn 2, so all of turn 2 goes, no tool result orphaned
    history = await history_for(
        sessions, "t:1:", max_messages=11, budget_tokens=100_000, summarise=None
    )
    assert [m["content"] for m in history] == ["question 3", "answer 3"]
    await store.close()


async def test_one_huge_turn_cannot_push_the_history_past_the_token_budget(
    tmp_path: Path,
    state_store: str | None,
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    sessions = store.sessions
    await sessions.append_turn("t:1:", turn(1))
    huge = [{"role": "user", "content": "x" * 1_000_000}, {"role": "assistant", "content": "ok"}]
    await sessions.append_turn("t:1:", huge)
    await sessions.append_turn("t:1:", turn(3))
    await sessions.append_turn("t:1:", turn(4))
    history = await history_for(
        sessions, "t:1:", max_messages=40, budget_tokens=1_000, summarise=None
    )
    # whole turns, newest first, stopping at the first that does not fit
    assert [m["content"] for m in history] == ["question 3", "answer 3", "question 4", "answer 4"]
    await store.close()


async def test_an_answer_that_was_never_delivered_leaves_the_history(
    tmp_path: Path, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    await answered(store, 1, expired=False)
    await answered(store, 2, expired=True)
    # the question stays (the user asked it); the answer they never saw does not
    assert await stored(store.sessions, "t:1:") == ["question 1", "answer 1", "question 2"]
    await store.close()


async def answered(store: Store, n: int, *, expired: bool) -> None:
    from channels.base import IncomingMessage

    msg = IncomingMessage(ChatRef("t", "1"), "42", "Ann", f"question {n}", message_id=str(n))
    inbox_id = await store.inbox.add(msg)
    assert inbox_id is not None

    def commit(conn: sqlite3.Connection) -> int:
        store.sessions.add_turn(conn, "t:1:", turn(n), inbox_id)
        store.inbox.finish(conn, inbox_id, "done")
        return store.outbox.insert(
            conn, msg.chat, [OutgoingPart(f"answer {n}")], inbox_id=inbox_id, deliver_within_s=60
        )

    outgoing = await store.db.write(commit)
    if expired:  # what the courier records when the reply's deadline passes unsent
        given_up = PartOutcome(outgoing, 0, "unsent", reason="429 for an hour", expired=True)
        await store.outbox.record([given_up])


async def test_a_message_is_stored_once_even_when_delivered_twice(
    tmp_path: Path, state_store: str | None
) -> None:
    from channels.base import IncomingMessage

    store = await open_store(tmp_path / "state.db", url=state_store)
    msg = IncomingMessage(ChatRef("t", "1"), "42", "Ann", "hello there", message_id="7")
    first = await store.inbox.add(msg)
    assert first is not None and await store.inbox.add(msg) is None
    pending = await store.inbox.oldest("t:1:")
    assert pending is not None and pending.message == msg
    assert await store.db.fetchall("SELECT COUNT(*) FROM inbox") == [(1,)]
    await store.close()
    if state_store is None:
        with sqlite3.connect(tmp_path / "state.db") as db:
            assert db.execute("PRAGMA synchronous").fetchone()[0] in (2, 3)  # FULL


async def test_chats_are_separate_and_survive_reopening(
    tmp_path: Path, state_store: str | None
) -> None:
    path = tmp_path / "state.db"
    opened = await open_store(path, url=state_store)
    await opened.sessions.append_turn("telegram:1:", turn(1))
    await opened.sessions.append_turn("telegram:2:", turn(2))
    await opened.close()
    again = await open_store(path, url=state_store)
    reopened = again.sessions
    assert await stored(reopened, "telegram:1:") == ["question 1", "answer 1"]
    await reopened.new_session("telegram:1:")
    assert await stored(reopened, "telegram:1:") == []
    assert await reopened.count("telegram:2:") == 2
    rows = await again.db.fetchall("SELECT role, created_at > 0 FROM messages ORDER BY id")
    assert [(role, bool(later)) for role, later in rows] == [
        ("user", True),
        ("assistant", True),
        ("user", True),
        ("assistant", True),
    ]
    await again.close()
    if state_store is None:
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_write_that_fails_leaves_nothing_and_the_store_goes_on(
    tmp_path: Path, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)

    def half_a_turn(conn: sqlite3.Connection) -> None:
        store.sessions.add_turn(conn, "t:1:", turn(1))
        raise ValueError("the reply could not be stored")

    with pytest.raises(ValueError, match="could not be stored"):
        await store.db.write(half_a_turn)
    assert await store.sessions.count("t:1:") == 0
    await store.sessions.append_turn("t:1:", turn(2))
    assert await store.sessions.count("t:1:") == 2
    await store.close()


async def test_a_write_whose_caller_is_cancelled_still_commits_whole(
    tmp_path: Path, state_store: str | None
) -> None:
    store = await open_store(tmp_path / "state.db", url=state_store)
    started = threading.Event()

    def slow_turn(conn: sqlite3.Connection) -> None:
        started.set()
        store.sessions.add_turn(conn, "t:1:", turn(1))
        time.sleep(0.2)
        store.sessions.add_turn(conn, "t:1:", turn(2))

    writing = asyncio.create_task(store.db.write(slow_turn))
    await asyncio.to_thread(started.wait, 5)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    assert await store.sessions.count("t:1:") == 4  # both turns: never half of it
    await store.close()


async def test_the_courier_sends_every_reply_in_order_also_one_queued_while_it_marks(
    tmp_path: Path,
    state_store: str | None,
) -> None:
    """The courier reads a chat's next reply in the same trip as the last mark of the one
    before: a reply queued meanwhile (here: while the first one's parts go out) is still
    sent, in order, and the outbox ends with every reply marked sent."""
    from agent.runtime.queues.courier import Courier
    from channels.terminal import TerminalChannel

    store = await open_store(tmp_path / "state.db", url=state_store)
    chat = ChatRef("t", "1")
    sent: list[str] = []

    async def queue(*texts: str) -> None:
        parts = [OutgoingPart(text) for text in texts]
        await store.db.write(
            lambda conn: store.outbox.insert(conn, chat, parts, inbox_id=None, deliver_within_s=60)
        )
        courier.wake(chat.key)

    class Recorder(TerminalChannel):
        async def send_part(self, to: ChatRef, part: OutgoingPart) -> None:
            sent.append(part.text)
            if part.text == "1c":  # the last part of the first reply
                await queue("3")

    courier = Courier(Recorder(), store.outbox)
    await queue("1a", "1b", "1c")
    await queue("2")
    for _ in range(200):
        if not courier.busy:
            break
        await asyncio.sleep(0.01)
    assert sent == ["1a", "1b", "1c", "2", "3"]
    assert await store.outbox.waiting() == 0
    rows = await store.db.fetchall("SELECT sent, status FROM outbox ORDER BY id")
    assert rows == [(3, "sent"), (1, "sent"), (1, "sent")]
    await store.close()
