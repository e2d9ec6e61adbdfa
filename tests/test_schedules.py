"""Schedules end to end: the daemon with the real Telegram adapter against the fake Bot API
and the fake LLM. The model calls schedule_task; the tests assert what reaches the chat
when it comes due (nobody having written), what the model was shown, and what state.db
holds — also across a stop and a restart, and for runs missed while the daemon was down.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from daemon_process import rows
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram, SentMessage

from agent.app import open_store
from agent.config import load_settings
from agent.durable.inbox import Pending, encode
from agent.durable.schedules import NewSchedule, Schedules
from agent.proactive.schedule_book import ChatSchedules
from channels.base import ChatRef, IncomingMessage
from tools.base import Speaker, ToolCallContext
from tools.proactive.schedule_tools import ScheduleTools

OWNER = 42
TASK = "Remind Alice to water the tomatoes."


def sent_to(fake: FakeTelegram, chat: int) -> list[SentMessage]:
    return [m for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat]


def user_text(request: dict[str, Any]) -> str:
    return str(next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user"))


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def schedule(when: str, task: str = TASK) -> Any:
    return tool_calls(("schedule_task", {"when": when, "task": task}))


async def test_in_2_seconds_runs_in_the_chat_without_a_message_and_the_reply_arrives(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.script(
        schedule("2020-01-01T09:00"),  # in the past: the model is told, and tries again
        schedule("in 2 seconds"),
        text("I'll remind you."),
        text("Alice, time to water the tomatoes!"),
    )
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "remind me in 2 seconds to water the tomatoes")
        [said] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        asked_at = time.monotonic()
        assert said.plain == "I'll remind you."
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2, timeout=10)
    _, second, third, fourth = fake_llm.requests
    assert "Not scheduled: 2020-01-01T09:00 is in the past" in tool_results(second)[0]
    assert tool_results(third)[1].startswith("Scheduled #1 once, next ")
    assert tool_results(third)[1].endswith(f": {TASK}")
    reminder = sent_to(fake_telegram, OWNER)[1]
    assert reminder.plain == "Alice, time to water the tomatoes!"
    assert reminder.at - asked_at > 1.0  # it waited for its time
    assert reminder.reply_to_message_id is None  # it answers no message
    envelope = user_text(fourth)
    assert envelope.splitlines()[0].endswith("| telegram | scheduled]")
    assert "Scheduled task #1 (set " in envelope and f"): {TASK}" in envelope
    assert "nobody is waiting on a message" in envelope
    db = home / "state.db"
    assert rows(db, "SELECT kind, status, runs, chat_key, sender_id FROM schedules") == [
        ("once", "done", 1, f"telegram:{OWNER}:", str(OWNER))
    ]
    (asked, _), (ran, trigger) = rows(db, "SELECT message_id, trigger FROM inbox ORDER BY id")
    assert asked.isdigit() and ran.startswith("schedule:1:")  # one message from a person
    assert json.loads(trigger)["kind"] == "scheduled"


async def test_a_schedule_survives_sigterm_and_runs_after_the_restart(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.script(schedule("in 3 seconds"), text("Noted."))
    db = home / "state.db"
    async with daemon() as first:
        fake_telegram.inject_message(OWNER, OWNER, "remind me in 3 seconds")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        os.kill(os.getpid(), signal.SIGTERM)  # the daemon's own handler stops it
        assert await asyncio.wait_for(asyncio.shield(first.task), 10) == 0  # type: ignore[arg-type]
    [(status, runs, due)] = rows(db, "SELECT status, runs, next_due FROM schedules")
    assert (status, runs) == ("active", 0) and due > time.time()
    fake_llm.script(text("Tomatoes!"))
    async with daemon():
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2, timeout=10)
        await asyncio.sleep(0.5)  # and nothing more
    assert [m.plain for m in sent_to(fake_telegram, OWNER)] == ["Noted.", "Tomatoes!"]
    assert rows(db, "SELECT status, runs FROM schedules") == [("done", 1)]


def plant(
    home: Path, url: str | None, chat: int, kind: str, spec: str, due: float, sender: int = OWNER
) -> None:
    """A schedule left in the store (state.db, or PostgreSQL at `url`) by an earlier run."""

    async def add() -> None:
        store = await open_store(home / "state.db", url=url)
        try:
            await Schedules(store.db).add(
                NewSchedule(kind, spec, f"task of chat {chat}", ChatRef("telegram", str(chat)),
                            str(sender), due, sender_name=f"user {sender}")  # type: ignore[arg-type]
            )  # fmt: skip
        finally:
            await store.close()

    asyncio.run(add())


def utc_fields(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


@pytest.mark.both_stores
def test_runs_missed_while_down_run_once_when_recent_else_are_skipped_and_the_chat_told(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    monkeypatch: pytest.MonkeyPatch, state_store: str | None,
) -> None:  # fmt: skip
    monkeypatch.setenv("PINCLAW_AGENT__TIMEZONE", "UTC")
    now = time.time()
    two_hours_ago, ten_minutes_ago = utc_fields(now - 7200), utc_fields(now - 600)
    put = partial(plant, home, state_store)
    put(101, "once", "a minute ago", now - 60)  # within catch_up_s: runs
    put(102, "once", "two hours ago", now - 7200)  # beyond it: skipped, chat told
    daily = f"{two_hours_ago.minute} {two_hours_ago.hour} * * *"
    put(103, "cron", daily, now - 7200)  # its run two hours ago: skipped, stays on
    put(104, "once", "just now", now - 5, sender=777)  # 777 is not allowed: skipped
    hourly = f"{ten_minutes_ago.minute} * * * *"
    put(105, "cron", hourly, now - 5 * 3600)  # missed five times: runs once

    async def serve() -> None:
        async with Daemon():
            for chat in (101, 102, 103, 105):
                await fake_telegram.await_for(lambda m, c=chat: m.chat_id == c, timeout=10)
            await asyncio.sleep(0.5)  # and nothing more

    asyncio.run(serve())
    assert len(fake_llm.requests) == 2  # the two that ran; nothing for 102, 103, 104
    ran = {m.chat_id: m.plain or "" for m in fake_telegram.sent}
    assert set(ran) == {101, 102, 103, 105}
    assert "Scheduled task #1" in ran[101] and "task of chat 101" in ran[101]
    assert "Scheduled task #5" in ran[105] and f'repeating "{hourly}"' in ran[105]
    assert ran[102].startswith('Skipped scheduled task #2 ("task of chat 102"): it was due ')
    assert ran[103].startswith('Skipped scheduled task #3 ("task of chat 103")')
    assert "It runs again " in ran[103]
    found = {r[0]: r[1:] for r in rows(home / "state.db",
             "SELECT id, status, runs, next_due, note FROM schedules")}  # fmt: skip
    assert found[1][:2] == ("done", 1) and found[2][:2] == ("skipped", 0)
    assert found[3][:2] == ("active", 0) and found[3][2] > now + 20 * 3600  # tomorrow
    assert "missed by 120 min" in found[3][3]
    assert found[4] == ("skipped", 0, None, "the person who set it is no longer allowed")
    assert found[5][:2] == ("active", 1) and now + 40 * 60 < found[5][2] < now + 61 * 60


async def test_a_scheduled_turn_asks_its_chat_for_approval_and_no_answer_is_a_denial(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "1")
    keep = home / "workspace" / "keep.txt"
    keep.parent.mkdir(parents=True)
    keep.write_text("precious\n")
    fake_llm.script(
        schedule("in 1 second", "Delete keep.txt."),
        text("Scheduled."),
        tool_calls(("shell", {"command": "rm keep.txt"})),  # rm is not allowed: it asks
        text("I could not delete keep.txt: nobody approved."),
    )
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt in a second")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=3, timeout=10)
    scheduled, question, answer = sent_to(fake_telegram, OWNER)
    assert scheduled.plain == "Scheduled."
    assert (question.plain or "").startswith("Approve shell: rm keep.txt")
    assert answer.plain == "I could not delete keep.txt: nobody approved."
    assert "the owner did not approve it" in tool_results(fake_llm.requests[-1])[-1]
    assert keep.read_text() == "precious\n"


def test_an_inbox_from_before_triggers_gains_the_column_and_keeps_its_messages(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:  # the inbox as the first release made it
        conn.execute(
            "CREATE TABLE inbox (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,"
            " chat_key TEXT NOT NULL, message_id TEXT NOT NULL, message TEXT NOT NULL,"
            " status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
            " next_attempt_at REAL NOT NULL DEFAULT 0, failing_since REAL,"
            " notified INTEGER NOT NULL DEFAULT 0, received_at REAL NOT NULL, done_at REAL)"
        )
        chat = ChatRef("telegram", "42")
        message = IncomingMessage(chat, "42", "Ann", "still there?", message_id="7")
        conn.execute(
            "INSERT INTO inbox (channel, chat_key, message_id, message, received_at)"
            " VALUES ('telegram', 'telegram:42:', '7', ?, 0)",
            (encode(message),),
        )

    async def reopen() -> Pending | None:
        store = await open_store(path)
        try:
            return await store.inbox.oldest("telegram:42:")
        finally:
            await store.close()

    pending = asyncio.run(reopen())
    assert pending is not None and pending.message == message and pending.trigger is None
    assert rows(path, "SELECT trigger FROM inbox") == [("",)]


@pytest.mark.both_stores
async def test_cancelling_a_schedule_by_an_id_too_large_for_sql_says_there_is_none(
    home: Path,
) -> None:
    """cancel_schedule(id=2**63): past SQL's integers, the store raised OverflowError and
    the model read "cancel_schedule failed: OverflowError" instead of the missing id's line."""
    settings = load_settings()
    store = await open_store(settings.state_db, url=settings.state_url)
    try:
        tools = ScheduleTools(ChatSchedules(Schedules(store.db), settings), "UTC").tools()
        cancel = {tool.name: tool for tool in tools}["cancel_schedule"]
        call = ToolCallContext(home, chat_key="telegram:42:", speaker=Speaker("42", "Ann"))
        for missing in (12, 2**63, -(2**63) - 1):
            result = await cancel.run({"id": missing}, call)
            assert (result.ok, result.output) == (
                False,
                f"no schedule #{missing} in this chat; list the schedules to see them",
            )
    finally:
        await store.close()
