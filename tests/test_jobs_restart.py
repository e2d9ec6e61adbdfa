"""A sub-agent's job across kill -9: `agent run` as a process on the HTTP double and the fake
Telegram, killed while the job's shell call runs. The tests assert what the chat shows, what
the workspace holds and the rows left in state.db."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.llm_requests import last_user_content, tool_results
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram

Request = dict[str, Any]


def job_task(request: Request) -> str | None:
    lines = str(last_user_content(request)).splitlines()
    return lines[1] if lines and lines[0].startswith("[Job #") else None


def delegate(task: str) -> tuple[str, dict[str, Any]]:
    return ("delegate", {"task": task})


def test_a_job_killed_mid_tool_resumes_and_its_result_comes_once(
    telegram_env: dict[str, str],
    owner_is_42: None,
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`agent run` as a process on the HTTP double, killed while the job's shell call runs
    (it appended, its outcome not recorded); after the restart the job runs again, its
    journal says the call's outcome is unknown, it looks instead of appending again, and its
    result reaches the chat once."""
    monkeypatch.setenv("PINCLAW_SECURITY__ALLOWED_COMMANDS", '["echo", "sleep", "cat"]')
    monkeypatch.setenv("PINCLAW_AGENT__SUB_AGENTS", "true")
    appended = "echo fed >> feed.log && sleep 4"
    feed_log = home / "workspace" / "feed.log"

    def respond(request: Request) -> Any:
        said = tool_results(request)
        if job_task(request) is not None:
            if not said:
                return tool_calls(("shell", {"command": appended}))
            if "outcome is unknown" in said[-1]:
                return tool_calls(("file_read", {"path": "feed.log"}))
            return f"fed, the log holds: {said[-1].strip()}"
        return "A helper is on it." if said else tool_calls(delegate("feed the fish once"))

    fake_llm.responder = respond
    daemons: list[DaemonProcess] = []
    try:
        first = DaemonProcess(env_of(), tmp_path / "first.log").start()
        daemons.append(first)
        wait_until(lambda: "telegram started" in first.log, 60, "polling", first)
        fake_telegram.inject_message(7, 42, "feed the fish")
        wait_until(lambda: feed_log.exists() and telegram_replies(fake_telegram) != [], 30, "fed")
        first.kill9()
        assert rows(home / "state.db", "SELECT state FROM jobs") == [("running",)]
        journalled = "SELECT tool, finished_at IS NULL FROM tool_journal WHERE inbox_id = -1"
        assert rows(home / "state.db", journalled) == [("shell", 1)]  # intent, no outcome

        again = DaemonProcess(env_of(), tmp_path / "again.log").start()
        daemons.append(again)
        wait_until(lambda: len(telegram_replies(fake_telegram)) >= 2, 30, "the result", again)
        time.sleep(0.5)  # nothing more comes
        assert again.terminate() == 0
    finally:
        for daemon in daemons:
            daemon.ensure_stopped()
    assert telegram_replies(fake_telegram) == [
        "A helper is on it.",
        "Job #1 (feed the fish once) finished:\nfed, the log holds: fed",
    ]
    assert feed_log.read_text() == "fed\n"  # the effect once
    assert rows(home / "state.db", "SELECT state, delivered FROM jobs") == [("done", "message")]
    assert rows(home / "state.db", "SELECT COUNT(*) FROM tool_journal") == [(0,)]


def telegram_replies(fake: FakeTelegram) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == 7]


def test_a_turn_cut_off_while_it_waits_for_its_job_does_not_start_it_twice(
    telegram_env: dict[str, str],
    owner_is_42: None,
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kill -9 while a turn waits for its job: after the restart the turn runs again, its
    delegate call is found cut off and checked (the job's row), not made a second time; the
    job runs again and its result comes once, as a message."""
    monkeypatch.setenv("PINCLAW_AGENT__SUB_AGENTS", "true")
    slow = {"job": True}

    def respond(request: Request) -> Any:
        said = tool_results(request)
        if job_task(request) is not None:
            return text("42 fish", delay_s=30 if slow["job"] else 0)
        if said:
            return f"parent heard: {said[-1]}"
        return tool_calls(("delegate", {"task": "count the fish", "wait": True}))

    fake_llm.responder = respond
    daemons: list[DaemonProcess] = []
    try:
        first = DaemonProcess(env_of(), tmp_path / "first.log").start()
        daemons.append(first)
        wait_until(lambda: "telegram started" in first.log, 60, "polling", first)
        fake_telegram.inject_message(7, 42, "how many fish?")
        asked = lambda: any(job_task(r) is not None for r in fake_llm.requests)  # noqa: E731
        wait_until(asked, 30, "the job's model call", first)
        first.kill9()
        slow["job"] = False
        again = DaemonProcess(env_of(), tmp_path / "again.log").start()
        daemons.append(again)
        wait_until(lambda: len(telegram_replies(fake_telegram)) >= 2, 30, "both", again)
        time.sleep(0.5)  # nothing more comes
        assert again.terminate() == 0
    finally:
        for daemon in daemons:
            daemon.ensure_stopped()
    result = "Job #1 (count the fish) finished:\n42 fish"
    replies = telegram_replies(fake_telegram)
    assert replies.count(result) == 1 and len(replies) == 2  # the result once, as a message
    (parent,) = [reply for reply in replies if reply != result]
    checked = (  # the job's row, as it stood when the turn ran again (resumed, or ended)
        "parent heard: Not run again: this call (delegate) was running when pinclaw stopped "
        "and its outcome was not recorded. Checked now: job #1 "
    )
    assert parent.startswith(checked)
    assert parent.endswith(
        (
            "was started and runs again now; its result will come to this chat as a message",
            "finished; its result was sent to this chat:\n42 fish",
        )
    )
    assert rows(home / "state.db", "SELECT id, state, delivered FROM jobs") == [
        (1, "done", "message")
    ]
