"""A turn waiting for a person's approval holds no turn slot (issue 40's soak: sixteen
unanswered questions held all sixteen `max_concurrent_turns` slots for their whole timeout,
and every other chat stalled). The daemon on the Telegram double with the model double: more
chats wait on a question than there are slots, and another chat is still answered; the
owner's /status says how many questions wait; the questions answered, their turns go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_socket
from conftest import Daemon
from fakes.llm_server import Outcome, last_user_content, tool_results
from fakes.model_double import FunctionModel, echo, text, tool_calls
from fakes.telegram_server import FakeTelegram, SentMessage, buttons

from agent.cli.doctor.checks import _daemon_line
from agent.runtime.queues.turn_slots import TurnSlots

OWNER = 42
ASKERS = (43, 44, 45)  # three chats waiting on a question, with two slots


def asks_first(request: dict[str, Any]) -> Outcome:
    """A command outside the allow-list for "delete", then "done"; anything else echoed."""
    if tool_results(request):
        return text("done")
    if "delete" in str(last_user_content(request)):
        return tool_calls(("shell", {"command": "rm keep.txt"}))
    return echo(request)


@pytest.fixture
def asking_model(monkeypatch: pytest.MonkeyPatch) -> FunctionModel:
    from agent.app import build_app
    from agent.daemon import serve

    double = FunctionModel(asks_first)
    monkeypatch.setattr(serve, "build_app", lambda settings: build_app(settings, model=double))
    return double


def from_chat(chat: int) -> Callable[[SentMessage], bool]:
    return lambda m: m.chat_id == chat


async def test_chats_waiting_on_approvals_leave_the_slots_to_other_chats(
    home: Path,
    telegram_model_env: dict[str, str],
    asking_model: FunctionModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_AGENT__MAX_CONCURRENT_TURNS", "2")
    monkeypatch.setenv("PINCLAW_SECURITY__APPROVAL_TIMEOUT_S", "60")
    monkeypatch.setenv("PINCLAW_PEOPLE__OWNER__TELEGRAM", str(OWNER))
    monkeypatch.setenv("PINCLAW_PEOPLE__OWNER__OWNER", "true")
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS", '["42", "43", "44", "45"]')
    async with daemon():
        for chat in ASKERS:
            fake_telegram.inject_message(chat, chat, "delete keep.txt")
        questions = await fake_telegram.await_for(lambda m: bool(buttons(m)), count=3, timeout=15)
        assert sorted(q.chat_id for q in questions) == list(ASKERS)
        fake_telegram.inject_message(OWNER, OWNER, "hello")  # no slot is free if they held one
        (answer,) = await fake_telegram.await_for(from_chat(OWNER), timeout=15)
        assert (answer.plain or "").startswith("echo: [") and answer.plain.endswith("\nhello")
        fake_telegram.inject_message(OWNER, OWNER, "/status")
        await fake_telegram.await_for(from_chat(OWNER), count=2, timeout=10)
        status = [m for m in fake_telegram.sent if m.chat_id == OWNER][-1].plain or ""
        assert "Approval questions waiting for an answer: 3" in status
        pytest_socket.socket_allow_hosts(["127.0.0.1", "::1"], allow_unix_socket=True)
        doctor_says = await asyncio.to_thread(_daemon_line, home)  # `agent doctor`'s line
        assert doctor_says.endswith("; 3 approval question(s) waiting for an answer")
        for question in questions:
            deny = buttons(question)["Deny"]
            fake_telegram.inject_callback_query(question.chat_id, question, deny)
        for chat in ASKERS:  # each turn takes a slot again and ends
            await fake_telegram.await_for(
                lambda m, c=chat: m.chat_id == c and m.plain == "done", timeout=15
            )
    results = [tool_results(r) for r in asking_model.requests if tool_results(r)]
    assert len(results) == 3 and all("did not approve" in r[0] for r in results)


async def test_a_turn_parked_on_a_question_gives_its_slot_back_and_takes_one_again() -> None:
    slots = TurnSlots(1)
    async with slots.hold() as first:
        async with first.asking():
            assert slots.asking == 1
            async with slots.hold() as second:  # the one slot is free while the first asks
                assert second.held
        assert first.held and slots.asking == 0
    assert not slots.semaphore.locked()


async def test_a_turn_stopped_while_it_asks_ends_at_once_though_every_slot_is_taken() -> None:
    """/stop on a turn waiting for a person while another turn holds the only slot: the
    stopped turn ends there and then (it used to wait for a slot to come free, only to give
    it back, and "Stopped." waited with it); the slots add up afterwards."""
    slots = TurnSlots(1)
    asking, other_started, other_done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def parked_turn() -> None:
        async with slots.hold() as slot, slot.asking():
            asking.set()
            await asyncio.Event().wait()  # the person never answers

    async def other_turn() -> None:
        async with slots.hold():
            other_started.set()
            await other_done.wait()

    stopped = asyncio.create_task(parked_turn())
    await asking.wait()
    other = asyncio.create_task(other_turn())
    await other_started.wait()  # it holds the one slot
    stopped.cancel()
    await asyncio.wait_for(asyncio.wait({stopped}), 1.0)
    assert stopped.cancelled() and slots.asking == 0
    other_done.set()
    await other
    assert not slots.semaphore.locked()
    async with slots.hold() as again:  # and the slot is there for the next turn
        assert again.held
