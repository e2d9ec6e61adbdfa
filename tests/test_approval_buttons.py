"""Approvals in the chat: the question arrives with Approve / Deny / Always allow buttons, only
the owner's press answers it, and the message then shows what was decided.

The real python-telegram-bot and discord.py talk to the fakes; the tests press buttons the way
a user does (an update through getUpdates, an INTERACTION_CREATE through the gateway) and read
what the chat shows afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakes.telegram_server import FakeTelegram, SentMessage
from pydantic import SecretStr
from telegram.error import BadRequest

from channels.base import ApprovalAnswer, ApprovalQuestion, ChatRef, IncomingMessage
from channels.config import TelegramSettings
from channels.telegram import TelegramChannel

OWNER, STRANGER = 42, 7
GROUP, TOPIC = -100123, 5
QUESTION = ApprovalQuestion(id="q-1", text="Run `rm -rf build/`? It deletes files.")
OUTCOMES = [
    ("Approve", "approve", "✅ Approved"),
    ("Deny", "deny", "❌ Denied"),
    ("Always allow", "always", "✅ Always allowed"),
]
TIMED_OUT = "⌛ No answer in time: denied"
NOT_YOURS = "Only the owner can answer this."
EXPIRED = "This question has expired."


def owner_only(sender_id: str, username: str) -> bool:
    return sender_id == str(OWNER)


# -- Telegram ----------------------------------------------------------------------------------


@pytest.fixture
async def telegram(fake_telegram: FakeTelegram, tmp_path: Path) -> AsyncIterator[TelegramChannel]:
    """A started Telegram channel on the fake Bot API (built as agent/app.py builds it)."""
    settings = TelegramSettings(
        enabled=True,
        bot_token=SecretStr(fake_telegram.token),
        allowed_users=[str(OWNER)],
        api_base=fake_telegram.api_base,
        file_api_base=fake_telegram.file_api_base,
    )
    channel = TelegramChannel(settings, workspace=tmp_path)
    received: list[IncomingMessage] = []
    await channel.start(received.append)
    try:
        yield channel
    finally:
        await channel.stop()


def buttons(message: SentMessage) -> dict[str, str]:
    """The inline buttons the message shows: label -> callback data."""
    rows = (message.reply_markup or {}).get("inline_keyboard", [])
    return {button["text"]: button["callback_data"] for row in rows for button in row}


def current(fake: FakeTelegram, message: SentMessage) -> SentMessage:
    """The message as the chat shows it now."""
    return next(m for m in fake.sent if m.message_id == message.message_id)


async def question_message(fake: FakeTelegram) -> SentMessage:
    (message,) = await fake.await_for(lambda m: bool(buttons(m)))
    return message


async def shown_to(fake: FakeTelegram, query_id: str) -> str | None:
    """What the user who pressed (query `query_id`) was shown, once the bot answered."""

    def answered() -> list[Any]:
        return [a for a in fake.callback_answers if a.callback_query_id == query_id]

    deadline = asyncio.get_running_loop().time() + 5
    while not answered():
        assert asyncio.get_running_loop().time() < deadline, "the press was never answered"
        await asyncio.sleep(0.01)
    (answer,) = answered()
    return str(answer.text) if answer.text is not None else None


@pytest.mark.parametrize(("label", "expected", "outcome"), OUTCOMES)
async def test_telegram_owner_press_answers_and_the_message_shows_the_outcome(
    telegram: TelegramChannel,
    fake_telegram: FakeTelegram,
    label: str,
    expected: ApprovalAnswer,
    outcome: str,
) -> None:
    chat = ChatRef("telegram", str(OWNER))
    asking = asyncio.create_task(telegram.ask_approval(chat, QUESTION, owner_only))
    message = await question_message(fake_telegram)
    assert message.plain == QUESTION.text
    assert list(buttons(message)) == ["Approve", "Deny", "Always allow"]
    assert all(len(data.encode()) <= 64 for data in buttons(message).values())

    query = fake_telegram.inject_callback_query(
        OWNER, message, buttons(message)[label], username="owner"
    )

    assert await asyncio.wait_for(asking, 5) == expected
    after = current(fake_telegram, message)
    assert after.plain == f"{QUESTION.text}\n\n{outcome}"
    assert after.reply_markup is None  # no buttons left to press
    assert await shown_to(fake_telegram, query) == outcome


async def test_telegram_stranger_is_refused_and_the_owner_decides_in_the_topic(
    telegram: TelegramChannel, fake_telegram: FakeTelegram
) -> None:
    chat = ChatRef("telegram", str(GROUP), str(TOPIC))
    asking = asyncio.create_task(telegram.ask_approval(chat, QUESTION, owner_only))
    message = await question_message(fake_telegram)
    assert (message.chat_id, message.message_thread_id) == (GROUP, TOPIC)

    stranger = fake_telegram.inject_callback_query(
        STRANGER, message, buttons(message)["Approve"], username="mallory"
    )
    assert await shown_to(fake_telegram, stranger) == NOT_YOURS
    assert not asking.done()
    still = current(fake_telegram, message)
    assert still.plain == QUESTION.text and list(buttons(still)) == list(buttons(message))

    fake_telegram.inject_callback_query(OWNER, message, buttons(message)["Deny"])
    assert await asyncio.wait_for(asking, 5) == "deny"
    after = current(fake_telegram, message)
    assert after.plain == f"{QUESTION.text}\n\n❌ Denied" and after.reply_markup is None


async def test_telegram_timeout_turns_the_question_into_a_denial_note(
    telegram: TelegramChannel, fake_telegram: FakeTelegram
) -> None:
    chat = ChatRef("telegram", str(OWNER))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(telegram.ask_approval(chat, QUESTION, owner_only), 1.0)
    (message,) = [m for m in fake_telegram.sent if m.method == "sendMessage"]
    assert message.plain == f"{QUESTION.text}\n\n{TIMED_OUT}"
    assert message.reply_markup is None
    assert message.edits == [QUESTION.text]  # it was the question before


async def test_telegram_press_on_a_question_no_longer_waiting_is_told_it_expired(
    telegram: TelegramChannel, fake_telegram: FakeTelegram
) -> None:
    """The denial note could not be written (Telegram refused the edit): the timeout still
    ends the wait, and a late press on the buttons left behind is told it came too late."""
    fake_telegram.fail_next("editMessageText", status=400, description="Bad Request: nope")
    chat = ChatRef("telegram", str(OWNER))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(telegram.ask_approval(chat, QUESTION, owner_only), 1.0)
    message = current(fake_telegram, await question_message(fake_telegram))
    assert message.plain == QUESTION.text  # the edit failed: buttons still there

    late = fake_telegram.inject_callback_query(OWNER, message, buttons(message)["Approve"])

    assert await shown_to(fake_telegram, late) == EXPIRED
    assert current(fake_telegram, message).plain == QUESTION.text


async def test_telegram_question_that_cannot_be_sent_raises(
    telegram: TelegramChannel, fake_telegram: FakeTelegram
) -> None:
    fake_telegram.fail_next("sendMessage", status=400, description="Bad Request: chat not found")
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await telegram.ask_approval(ChatRef("telegram", str(OWNER)), QUESTION, owner_only)
    assert fake_telegram.sent == []
