"""What a person sees while the model is slow or failing (issue 40): `agent run` in this
process with the real Telegram adapter on the fake Bot API and the HTTP model double at
127.0.0.1, thresholds scaled down. A single 500 that the retry fixes says nothing; failures
that last are told once; a model slow to say its first word gets "still thinking"; a stream
cut until the turn gives up leaves no partial text above the answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon, eventually
from fakes.llm_server import FakeLLM, cut, delay, error, text, tool_calls
from fakes.telegram_server import FakeTelegram

from agent.runtime.queues.outage import OUTAGE_NOTICE, STILL_THINKING

OWNER = 42


@pytest.fixture
def slow_env(telegram_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "PINCLAW_LLM__NUM_RETRIES": "2",
        "PINCLAW_LLM__RETRY_BACKOFF_S": "0.3",
        "PINCLAW_AGENT__TURN_RETRY_BACKOFF_S": "0.3",
        "PINCLAW_AGENT__OUTAGE_NOTICE_AFTER_S": "1.5",
        "PINCLAW_AGENT__STILL_THINKING_AFTER_S": "5",
        "PINCLAW_PEOPLE": '{"me": {"telegram": "42", "owner": true}}',
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def shown(fake: FakeTelegram) -> list[str]:
    """The owner's chat as it reads now: the bot's messages not deleted, latest edits."""
    sent = fake.sent
    return [m.plain or "" for m in sent if m.chat_id == OWNER and not m.deleted]


async def test_a_500_the_retry_fixes_says_nothing_an_outage_that_lasts_is_told_once(
    slow_env: None, fake_llm: FakeLLM, fake_telegram: FakeTelegram, daemon: Callable[[], Daemon]
) -> None:
    async with daemon():
        fake_llm.script(error(500), text("Fixed by the retry."))
        fake_telegram.inject_message(OWNER, OWNER, "first")
        await eventually(lambda: "Fixed by the retry." in shown(fake_telegram), within=10)
        assert len(fake_llm.requests) == 2  # it did fail once
        outage = fake_llm.outage(2.5, mode="500")  # past the 1.5 s: said, once
        fake_llm.script(text("Back again."))
        fake_telegram.inject_message(OWNER, OWNER, "second")
        await eventually(lambda: "Back again." in shown(fake_telegram), within=20)
        assert outage.received >= 3
    assert shown(fake_telegram) == ["Fixed by the retry.", OUTAGE_NOTICE, "Back again."]


async def test_a_model_slow_to_its_first_word_gets_still_thinking_a_quick_one_does_not(
    slow_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__STILL_THINKING_AFTER_S", "0.6")
    async with daemon():
        fake_llm.script(delay(1.5, text("Thought it through.")), text("Quick."))
        fake_telegram.inject_message(OWNER, OWNER, "hard question")
        await eventually(lambda: "Thought it through." in shown(fake_telegram), within=10)
        fake_telegram.inject_message(OWNER, OWNER, "easy question")
        await eventually(lambda: "Quick." in shown(fake_telegram), within=10)
        await eventually(lambda: len(fake_llm.requests) == 2, within=1)
    assert shown(fake_telegram) == [STILL_THINKING, "Thought it through.", "Quick."]


async def test_a_question_waiting_for_a_person_is_not_the_model_thinking(
    slow_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
) -> None:
    """The turn asks the owner (rm is supervised) and nobody answers for longer than the
    still-thinking wait: the question is on screen, no "Still thinking…" line joins it."""
    monkeypatch.setenv("PINCLAW_AGENT__STILL_THINKING_AFTER_S", "0.6")
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "1.5")
    (home / "workspace").mkdir(parents=True, exist_ok=True)
    (home / "workspace" / "keep.txt").write_text("precious\n")
    async with daemon():
        fake_llm.script(tool_calls(("shell", {"command": "rm keep.txt"})), text("Left it."))
        fake_telegram.inject_message(OWNER, OWNER, "delete keep.txt")
        await eventually(lambda: "Left it." in shown(fake_telegram), within=15)
    said = shown(fake_telegram)
    assert said[0].startswith("Approve shell: rm keep.txt") and said[-1] == "Left it."
    assert STILL_THINKING not in said
    assert (home / "workspace" / "keep.txt").read_text() == "precious\n"


async def test_a_stream_cut_until_the_turn_gives_up_leaves_no_partial_text_above_the_answer(
    slow_env: None,
    fake_llm: FakeLLM,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__OUTAGE_NOTICE_AFTER_S", "30")
    monkeypatch.setenv("PINCLAW_AGENT__STILL_THINKING_AFTER_S", "0")
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__STREAM_REPLIES", "true")
    partial = "The first half of an answer that"
    async with daemon():
        shown_then_cut = dataclasses.replace(cut(partial), piece_delay_s=0.2)
        fake_llm.script(shown_then_cut, cut(partial), cut(partial), text("The whole answer."))
        fake_telegram.inject_message(OWNER, OWNER, "tell me")
        await eventually(lambda: "The whole answer." in shown(fake_telegram), within=15)
        drafts = [m for m in fake_telegram.sent if (m.plain or "").startswith("The first")]
        assert drafts and all(m.deleted for m in drafts)  # it was on screen, then removed
    assert shown(fake_telegram) == ["The whole answer."]
