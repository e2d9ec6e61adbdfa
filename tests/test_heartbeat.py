"""The heartbeat end to end: with `[heartbeat] enabled`, the daemon runs a turn in the owner's
private Telegram chat every interval; a reply that is only the silent token sends nothing
(and leaves nothing in the chat's history), any other reply reaches the owner. The fake
Telegram and the in-process model double."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, eventually
from daemon_process import rows
from fakes.llm_server import FakeLLM
from fakes.model_double import ScriptedModel, text
from fakes.telegram_server import FakeTelegram

OWNER = 42
CHECK = "- Check that the greenhouse stays below 35 °C."
ALERT = "The greenhouse is at 38 °C: open the vents."


@pytest.fixture
def heartbeat_env(
    telegram_model_env: dict[str, str], home: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """Heartbeats every 1.2 s for the owner, Telegram user 42; a checklist of our own."""
    values = {
        "PINCLAW_HEARTBEAT__ENABLED": "true",
        "PINCLAW_HEARTBEAT__INTERVAL_MINUTES": "0.02",
        "PINCLAW_PEOPLE": '{"me": {"telegram": "42", "owner": true}}',
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    workspace = home / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "HEARTBEAT.md").write_text(f"# Heartbeat checklist\n\n{CHECK}\n")
    return {**telegram_model_env, **values}


def messages_of(request: dict[str, Any], role: str) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == role]


async def test_a_silent_heartbeat_sends_nothing_and_a_worrying_one_reaches_the_owner(
    heartbeat_env: dict[str, str], model: ScriptedModel, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    model.script(text("NO_REPLY"), text(ALERT))
    model.responder = lambda body: text("NO_REPLY")
    db = home / "state.db"
    async with daemon():  # the alert is the second heartbeat's answer
        [alert] = await fake_telegram.await_for(lambda m: m.chat_id == OWNER, timeout=5)
        await eventually(lambda: rows(db, "SELECT 1 FROM schedules WHERE runs >= 2"))
    assert alert.plain == ALERT and alert.reply_to_message_id is None
    assert [m.plain for m in fake_telegram.sent] == [ALERT]  # the silent one sent nothing
    assert fake_telegram.chat_actions == []  # and no "typing…" every half hour either
    first, second = model.requests[:2]
    [system] = messages_of(first, "system")[:1]
    assert "### HEARTBEAT.md" in system and CHECK in system  # the owner's private prompt
    [user] = messages_of(first, "user")
    assert user.splitlines()[0].endswith("| telegram | heartbeat]")
    assert "go through the checklist in HEARTBEAT.md" in user
    assert len(messages_of(second, "user")) == 1  # the silent heartbeat left no history
    [(kind, status, chat, runs)] = rows(db, "SELECT kind, status, chat_key, runs FROM schedules")
    assert (kind, status, chat) == ("heartbeat", "active", f"telegram:{OWNER}:") and runs >= 2
    assert rows(db, "SELECT message FROM messages WHERE role = 'assistant'") == [
        (f'{{"role": "assistant", "content": "{ALERT}"}}',)
    ]


async def test_a_person_behind_a_heartbeat_in_an_outage_is_told_and_answered_first(
    llm_env: dict[str, str],
    telegram_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model is down when the heartbeat fires: its turn is retried, quietly, for up to
    `retry_failed_turns_for_s`. The owner writes meanwhile: their message is not held behind
    it (it was, oldest first, for up to 30 minutes, neither answered nor reported). They are
    told of the outage, and answered once the model is back."""
    values = {
        "PINCLAW_HEARTBEAT__ENABLED": "true",
        "PINCLAW_HEARTBEAT__INTERVAL_MINUTES": "0.02",
        "PINCLAW_PEOPLE": '{"me": {"telegram": "42", "owner": true}}',
        "PINCLAW_AGENT__OUTAGE_NOTICE_AFTER_S": "1",
        "PINCLAW_AGENT__TURN_RETRY_BACKOFF_S": "1",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    outage = fake_llm.outage(120.0, mode="500")
    said = lambda: [m.plain or "" for m in fake_telegram.sent if m.chat_id == OWNER]  # noqa: E731
    async with daemon():
        await eventually(lambda: outage.received >= 1, within=15)  # the heartbeat's turn
        fake_telegram.inject_message(OWNER, OWNER, "are you there?")
        try:
            await eventually(lambda: any("unreachable" in line for line in said()), within=12)
        finally:
            outage.end()
        await eventually(lambda: any("are you there?" in line for line in said()), within=15)
