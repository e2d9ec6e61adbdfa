"""Schedules from the owner's side: `agent schedules list|cancel` at the terminal while the
daemon runs (a cancelled schedule never comes), the chat's own list_schedules and
cancel_schedule, and a schedule made in `agent run -m`, which runs in the owner's private
Telegram chat once the daemon does."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from daemon_process import rows
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram

from agent.cli.one_shot import run_once
from agent.config import load_settings

REPO = Path(__file__).resolve().parent.parent
OWNER = 42
TASK = "Tell Alice the bread is ready."


async def agent(*args: str) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the owner runs it in another terminal, off the event loop."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent", *args],
        capture_output=True, text=True, env=dict(os.environ), cwd=REPO, timeout=60,
    )  # fmt: skip


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_agent_schedules_cancel_while_the_daemon_runs_and_the_task_never_comes(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    # 10 s: room for two cold `agent` commands before it is due, on a loaded machine too
    fake_llm.script(
        tool_calls(("schedule_task", {"when": "in 10 seconds", "task": TASK})),
        text("Will do."),
    )
    db = home / "state.db"
    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "in 10 seconds, tell Alice the bread is ready")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
        listed = await agent("schedules", "list")
        assert listed.returncode == 0, listed.stderr
        line = listed.stdout.strip()
        assert line.startswith("#1 once, next ") and line.endswith(
            f": {TASK}  [telegram:{OWNER}:, set by User]"
        ), line
        [(due,)] = rows(db, "SELECT next_due FROM schedules")
        cancelled = await agent("schedules", "cancel", "1")
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.startswith("Cancelled #1 once, next ")
        await asyncio.sleep(due + 0.5 - time.time())  # past its time
        assert len(fake_telegram.sent) == 1  # only "Will do."

        fake_llm.script(
            tool_calls(("list_schedules", {}), ("cancel_schedule", {"id": 1})),
            text("It was already cancelled."),
        )
        fake_telegram.inject_message(OWNER, OWNER, "what is scheduled? cancel the bread one")
        await fake_telegram.await_for(lambda m: m.chat_id == OWNER, count=2, timeout=10)
    *_, listing, refusal = tool_results(fake_llm.requests[-1])
    assert listing == (
        "No active schedules.\nEnded:\n"
        f"#1 once (cancelled: cancelled with agent schedules cancel): {TASK}"
    )
    assert refusal == "Error: schedule #1 has already ended (cancelled)"
    assert rows(db, "SELECT status, runs FROM schedules") == [("cancelled", 0)]
    again, missing, everything = await asyncio.gather(
        agent("schedules", "cancel", "1"),
        agent("schedules", "cancel", "7"),
        agent("schedules", "list", "--all"),
    )
    assert again.returncode == 1 and again.stderr == "Schedule #1 has already ended (cancelled).\n"
    assert missing.returncode == 1 and missing.stderr == "No schedule #7.\n"
    assert everything.stdout.startswith("#1 once (cancelled: cancelled with agent schedules")


async def test_a_one_shot_schedules_into_the_owners_telegram_chat_or_says_what_is_missing(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    ask = tool_calls(("schedule_task", {"when": "in 1 second", "task": TASK}))
    fake_llm.script(ask, text("I could not."))
    assert await run_once(load_settings(), "remind me in a second") == 0
    [refused] = tool_results(fake_llm.requests[-1])
    assert refused.startswith("Error: Not scheduled: schedules run in a Telegram or Discord chat")
    assert "[people.me] owner = true" in refused

    monkeypatch.setenv("PINCLAW_PEOPLE", '{"me": {"telegram": "42", "owner": true}}')
    fake_llm.script(ask, text("I'll remind you on Telegram."))
    assert await run_once(load_settings(), "remind me in a second") == 0
    assert "I'll remind you on Telegram." in capsys.readouterr().out
    [made] = tool_results(fake_llm.requests[-1])
    assert made.endswith(
        "It runs in the owner's private Telegram chat, when the daemon (`agent run`) is running."
    )
    fake_llm.script(text("The bread is ready, tell Alice."))
    async with daemon():
        [reminder] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=10)
    assert reminder.plain == "The bread is ready, tell Alice."
    users = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]
    assert "Scheduled task #1 (set " in users[-1] and f"by me): {TASK}\n" in users[-1]
    assert rows(home / "state.db", "SELECT chat_key, sender_name, status FROM schedules") == [
        (f"telegram:{OWNER}:", "me", "done")
    ]
