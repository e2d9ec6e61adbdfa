"""kill -9 in the middle of a steered turn (issue 40): `agent run` as a subprocess with the
fake Telegram and the fake LLM, in busy mode "steer". The second message has joined the
running turn when the daemon dies; after the restart both rows run again as one turn, the
finished tool is not run twice, and each row says which turn took it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.llm_server import FakeLLM, text, tool_calls
from fakes.telegram_server import FakeTelegram

OWNER = 42
WRITE = "sleep 1 && echo one >> steer.log"  # long enough for the second message to come
RECORDED = "[Not run again: this call already ran before pinclaw restarted."


@pytest.fixture
def daemons(
    telegram_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[DaemonProcess]]:
    monkeypatch.setenv("PINCLAW_SECURITY__ALLOWED_COMMANDS", '["echo", "sleep"]')
    monkeypatch.setenv("PINCLAW_CHANNELS__BUSY", "steer")
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.ensure_stopped()


def start(started: list[DaemonProcess], tmp_path: Path) -> DaemonProcess:
    daemon = DaemonProcess(env_of(), tmp_path / f"daemon-{len(started)}.log").start()
    started.append(daemon)
    wait_until(lambda: "telegram started" in daemon.log, 60, "polling", daemon)
    return daemon


def users(request: dict[str, object]) -> list[str]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if m["role"] == "user"]


def test_kill_9_in_a_steered_turn_loses_nothing_and_acts_once(
    daemons: list[DaemonProcess],
    fake_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    home: Path,
    tmp_path: Path,
) -> None:
    db = home / "state.db"
    first = start(daemons, tmp_path)
    fake_llm.script(tool_calls(("shell", {"command": WRITE})), text("too late", delay_s=60))
    fake_telegram.inject_message(OWNER, OWNER, "write one")
    wait_until(lambda: len(fake_llm.requests) == 1, 30, "the first model call", first)
    fake_telegram.inject_message(OWNER, OWNER, "and mention two")
    wait_until(lambda: rows(db, "SELECT COUNT(*) FROM inbox") == [(2,)], 30, "stored", first)
    wait_until(lambda: len(fake_llm.requests) == 2, 30, "the steered call", first)
    assert users(fake_llm.requests[1])[-1].endswith("and mention two")  # steered in
    first.kill9()

    fake_llm.reset()
    fake_llm.script(tool_calls(("shell", {"command": WRITE})), text("wrote one, said two"))
    again = start(daemons, tmp_path)
    wait_until(
        lambda: any(m.plain == "wrote one, said two" for m in fake_telegram.sent),
        30,
        "the answer",
        again,
    )
    assert again.terminate() == 0
    assert (home / "workspace" / "steer.log").read_text() == "one\n"  # the tool ran once
    last = fake_llm.requests[-1]
    (told,) = [str(m["content"]) for m in last["messages"] if m["role"] == "tool"]
    assert told.startswith(RECORDED)
    assert users(last)[-1].endswith("and mention two")
    inbox = rows(db, "SELECT id, status, taken_by FROM inbox ORDER BY id")
    (one, _, _), _ = inbox
    assert inbox == [(one, "done", one), (one + 1, "done", one)]
    said = [m.plain for m in fake_telegram.sent if m.chat_id == OWNER]
    assert said == ["wrote one, said two"]
