"""Pairing on Telegram, end to end: python-telegram-bot against the fake Bot API, the daemon in
this event loop, the in-process model double as the model.

A stranger who writes privately gets one reply with a code (one an hour) and the owner a line
with Approve / Deny buttons in their private chat; the owner answers by button, by `/pair` in
the chat or by `agent pairing` at the terminal (the real command, in another process); an
expired code, a locked-out sender, a group added with `/pair here`, pairing turned off, and
people let in who are still in after a restart and listed by `agent doctor`. The codes' clock
is agent/durable/owner/pairings.py's `wall_clock`, moved on by the tests.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Daemon
from fakes.llm_server import last_user_content
from fakes.model_double import ScriptedModel, text, tool_calls
from fakes.telegram_server import BOT_USERNAME, FakeTelegram, SentMessage, buttons

from agent.durable.owner import pairings
from agent.durable.owner.pairing_codes import typed_code

REPO = Path(__file__).resolve().parent.parent
OWNER, STRANGER, CAROL = 42, 777, 55  # the owner (in [people]); nobody; allowed as @carol
GROUP = -100500
CODE = re.compile(r"\b[A-Z0-9]{4}-[A-Z0-9]{4}\b")


class Clock:
    """The wall clock pairing reads, `offset` seconds ahead of the real one."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(pairings, "wall_clock", moved)
    return moved


@pytest.fixture
def env(telegram_model_env: dict[str, str], owner_is_42: None) -> dict[str, str]:
    """Telegram on the fake, 42 and @carol allowed, 42 the owner; pairing on by default."""
    return telegram_model_env


async def agent(*args: str) -> subprocess.CompletedProcess[str]:
    """`agent ARGS` as the owner runs it in another terminal, off the event loop."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=REPO,
        timeout=120,
    )


def sent_to(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [m.plain or "" for m in fake.sent if m.method == "sendMessage" and m.chat_id == chat_id]


def current(fake: FakeTelegram, message: SentMessage) -> SentMessage:
    """The message as the chat shows it now."""
    return next(m for m in fake.sent if m.message_id == message.message_id)


async def reply_to(fake: FakeTelegram, chat_id: int, containing: str) -> str:
    """The bot's message in `chat_id` holding `containing` (waited for)."""
    found = await fake.await_for(lambda m: m.chat_id == chat_id and containing in (m.plain or ""))
    return found[-1].plain or ""


async def code_of_stranger(fake: FakeTelegram, text: str = "hi, I'm Mallory") -> str:
    """The stranger writes; the code in the reply they get for it."""

    def with_code(m: SentMessage) -> bool:
        return m.chat_id == STRANGER and "pairing code" in (m.plain or "")

    before = len([m for m in fake.sent if with_code(m)])
    fake.inject_message(STRANGER, STRANGER, text, username="mallory", first_name="Mallory")
    found = CODE.search((await fake.await_for(with_code, count=before + 1))[-1].plain or "")
    assert found is not None
    return found.group()


async def owners_question(fake: FakeTelegram, code: str) -> SentMessage:
    """The owner's line about `code`, with its buttons."""
    found = await fake.await_for(
        lambda m: m.chat_id == OWNER and code in (m.plain or "") and bool(buttons(m))
    )
    return found[0]


async def answered_by_model(fake: FakeTelegram, model: ScriptedModel, text: str) -> None:
    """The stranger writes `text` and the model's answer arrives."""
    fake.inject_message(STRANGER, STRANGER, text, username="mallory", first_name="Mallory")
    await fake.await_for(
        lambda m: m.chat_id == STRANGER and (m.plain or "").startswith("echo: ") and text in m.plain
    )
    assert text in last_user_content(model.requests[-1])


async def stays_silent(fake: FakeTelegram, chat_id: int, before: int) -> None:
    await asyncio.sleep(0.6)  # long enough for a reply the runtime would queue at once
    assert len(sent_to(fake, chat_id)) == before


async def test_a_stranger_gets_a_code_the_owner_approves_by_button_and_the_model_answers(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        code = await code_of_stranger(fake_telegram)
        question = await owners_question(fake_telegram, code)
        assert list(buttons(question)) == ["Approve", "Deny"]  # no "Always allow"
        assert "Mallory (@mallory, telegram id 777)" in (question.plain or "")
        assert "hi, I'm Mallory" in (question.plain or "")
        assert model.requests == []  # nothing of the stranger's reached the model

        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Approve"])

        assert await reply_to(fake_telegram, STRANGER, pairings.WELCOME) == pairings.WELCOME
        shown = current(fake_telegram, question)
        assert (shown.plain or "").endswith("✅ Approved") and shown.reply_markup is None
        await answered_by_model(fake_telegram, model, "what is 2 + 2?")
    reply = sent_to(fake_telegram, STRANGER)[0]
    assert "777" in reply and "valid for an hour" in reply and "asked the owner" in reply


async def test_one_code_an_hour_and_a_code_past_its_hour_cannot_be_approved(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    clock: Clock,
) -> None:
    async with daemon():
        first = await code_of_stranger(fake_telegram)
        await owners_question(fake_telegram, first)
        for text in ("hello?", "anyone there?"):
            fake_telegram.inject_message(STRANGER, STRANGER, text, username="mallory")
        await stays_silent(fake_telegram, STRANGER, 1)  # one reply, not one per message
        assert sum(first in text for text in sent_to(fake_telegram, OWNER)) == 1

        clock.offset = 3601  # the hour is over: the code has expired
        fake_telegram.inject_message(OWNER, OWNER, f"/pair approve {first.lower()}")
        said = await reply_to(fake_telegram, OWNER, "had expired")
        assert said.startswith(f"Code {first} had expired")
        fake_telegram.inject_message(OWNER, OWNER, f"/pair approve {first}")
        await fake_telegram.await_for(
            lambda m: m.chat_id == OWNER and "had expired" in (m.plain or ""), count=2
        )

        second = await code_of_stranger(fake_telegram, "me again")  # a new hour, a new code
        assert second != first
        await owners_question(fake_telegram, second)
    assert model.requests == []


async def test_the_owner_approves_with_agent_pairing_at_the_terminal(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    home: Path,
) -> None:
    async with daemon():
        code = await code_of_stranger(fake_telegram)
        listed = await agent("pairing", "list")
        assert listed.returncode == 0, listed.stderr
        assert f"open code {code} (telegram): Mallory (@mallory, telegram id 777)" in listed.stdout

        wrong = await agent("pairing", "approve", "ZZZZ-ZZZZ")
        assert wrong.returncode == 1 and "No pairing code ZZZZ-ZZZZ" in wrong.stderr
        approved = await agent("pairing", "approve", code.lower().replace("-", ""))
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith(f"Approved {code}: Mallory")

        model.script(
            tool_calls(("memory_store", {"content": "Mallory keeps bees."})), text("Noted.")
        )
        fake_telegram.inject_message(
            STRANGER, STRANGER, "remember: I keep bees", username="mallory"
        )
        await reply_to(fake_telegram, STRANGER, "Noted.")
        await answered_by_model(fake_telegram, model, "thanks, hello!")
        again = await agent("pairing", "approve", code)
        assert again.returncode == 1 and "already answered (approved)" in again.stderr
    listed = await agent("pairing", "list")
    assert "let in: telegram person 777 Mallory @mallory, agent pairing" in listed.stdout
    with sqlite3.connect(home / "state.db") as db:  # their own scope, as an allowed user's
        memories = db.execute("SELECT scope, content FROM memories").fetchall()
    assert memories == [("person:telegram:777", "Mallory keeps bees.")]


async def test_a_denied_stranger_is_told_once_and_then_hears_nothing(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    clock: Clock,
) -> None:
    async with daemon():
        code = await code_of_stranger(fake_telegram)
        question = await owners_question(fake_telegram, code)
        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Deny"])
        assert await reply_to(fake_telegram, STRANGER, "did not") == pairings.DECLINED
        assert (current(fake_telegram, question).plain or "").endswith("❌ Denied")

        clock.offset = 2 * 3600  # past the code's hour: still no new code (a day)
        fake_telegram.inject_message(STRANGER, STRANGER, "please?", username="mallory")
        await stays_silent(fake_telegram, STRANGER, 2)
    assert model.requests == []
    assert len([text for text in sent_to(fake_telegram, OWNER) if "wants to talk" in text]) == 1


@pytest.mark.both_stores
async def test_wrong_codes_lock_a_sender_out_for_an_hour_then_an_invite_lets_them_in(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    clock: Clock,
) -> None:
    def stranger(text: str) -> None:
        fake_telegram.inject_message(
            STRANGER, STRANGER, text, username="mallory", first_name="Mallory"
        )

    async with daemon():
        fake_telegram.inject_message(OWNER, OWNER, "/pair invite")
        invite = CODE.search(await reply_to(fake_telegram, OWNER, "Invite code"))
        assert invite is not None
        for left in (4, 3, 2, 1):
            stranger("ABCD-EFGH")
            said = await reply_to(fake_telegram, STRANGER, f"After {left} more")
            assert said.startswith("That code is not valid")
        stranger("/start ABCDEFGH")  # a Telegram link's form counts the same
        await reply_to(fake_telegram, STRANGER, "Too many wrong codes")
        await reply_to(fake_telegram, OWNER, "too many wrong pairing codes")

        stranger(invite.group())  # the right code, but the sender is locked out
        stranger("hello")  # and no request either
        await stays_silent(fake_telegram, STRANGER, 5)

        clock.offset = 3601  # the lock's hour is over (and the first invite's)
        stranger(invite.group())
        await reply_to(fake_telegram, STRANGER, "After 4 more")
        fake_telegram.inject_message(OWNER, OWNER, "/pair invite")
        await fake_telegram.await_for(
            lambda m: m.chat_id == OWNER and "Invite code" in (m.plain or ""), count=2
        )
        fresh = CODE.search(sent_to(fake_telegram, OWNER)[-1])
        assert fresh is not None
        stranger(f"/start {fresh.group().replace('-', '')}")
        await reply_to(fake_telegram, STRANGER, "That code let you in")
        await reply_to(fake_telegram, OWNER, f"came in with invite {fresh.group()}")
        await answered_by_model(fake_telegram, model, "hello at last")


@pytest.mark.both_stores
async def test_the_owner_adds_a_group_with_pair_here(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    mention = f"@{BOT_USERNAME} what is on today?"
    async with daemon():
        fake_telegram.inject_message(GROUP, STRANGER, mention, chat_type="group")
        fake_telegram.inject_message(
            GROUP, STRANGER, f"/pair@{BOT_USERNAME} here", chat_type="group"
        )
        fake_telegram.inject_message(
            GROUP, CAROL, f"/pair@{BOT_USERNAME} here", chat_type="group", username="carol"
        )
        await reply_to(fake_telegram, GROUP, "Only the owner")  # @carol is allowed, not the owner
        assert len(sent_to(fake_telegram, GROUP)) == 1  # the stranger: silence, no code

        fake_telegram.inject_message(GROUP, OWNER, f"/pair@{BOT_USERNAME} here", chat_type="group")
        await reply_to(fake_telegram, GROUP, "Added this group")
        fake_telegram.inject_message(
            GROUP, STRANGER, mention, chat_type="group", first_name="Mallory"
        )
        await reply_to(fake_telegram, GROUP, "echo: ")
    assert "what is on today?" in last_user_content(model.requests[-1])
    assert len(model.requests) == 1  # the message from before /pair here was never taken
    assert sent_to(fake_telegram, STRANGER) == []  # nobody was sent a code


async def test_pairing_off_keeps_the_allow_list_alone(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__PAIRING", "false")
    async with daemon():
        fake_telegram.inject_message(STRANGER, STRANGER, "hi", username="mallory")
        reply = await reply_to(fake_telegram, STRANGER, "777")
        fake_telegram.inject_message(STRANGER, STRANGER, "/start ABCD-EFGH", username="mallory")
        fake_telegram.inject_message(OWNER, OWNER, "/pair invite")
        said = await reply_to(fake_telegram, OWNER, "Pairing is off")
        await stays_silent(fake_telegram, STRANGER, 1)
    assert "allowed_users" in reply and not CODE.search(reply)  # the reply of before pairing
    assert said.startswith("Pairing is off here (channels.telegram.pairing = false)")
    assert sent_to(fake_telegram, OWNER) == [said]
    with sqlite3.connect(home / "state.db") as db:
        assert db.execute("SELECT COUNT(*) FROM pairing_codes").fetchone() == (0,)
    assert model.requests == []


@pytest.mark.both_stores
async def test_people_let_in_are_still_in_after_a_restart_and_doctor_lists_them(
    env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        code = await code_of_stranger(fake_telegram)
        question = await owners_question(fake_telegram, code)
        fake_telegram.inject_callback_query(OWNER, question, buttons(question)["Approve"])
        await reply_to(fake_telegram, STRANGER, pairings.WELCOME)
    async with daemon():
        await answered_by_model(fake_telegram, model, "are you still there?")
    doctor = await agent("doctor")
    notes = [line for line in doctor.stdout.splitlines() if line.startswith("note pairing:")]
    today = time.strftime("%Y-%m-%d")
    assert notes == [f"note pairing: let in: telegram person 777 Mallory @mallory, button {today}"]


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("K7F3-PQ2M", "K7F3PQ2M"),
        ("/start k7f3pq2m", "K7F3PQ2M"),  # a t.me link's /start, any case, without the dash
        (f"/pair@{BOT_USERNAME} K7F3-PQ2M", "K7F3PQ2M"),
        ("K7F3PQ2M", None),  # eight letters alone are words
        ("well-done", None),  # not the codes' letters (no L, O, I, 0, 1)
        ("K7F3-PQ2M please", None),
        ("/start", None),
    ],
)
def test_what_a_stranger_types_counts_as_a_code(message: str, code: str | None) -> None:
    assert typed_code(message) == code
