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
from fakes.discord_server import FakeDiscord
from fakes.discord_server import SentMessage as DiscordSentMessage
from fakes.telegram_server import FakeTelegram, SentMessage, buttons
from pydantic import SecretStr
from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest

from channels.base import ApprovalAnswer, ApprovalQuestion, ChatRef, IncomingMessage
from channels.config import DiscordSettings, TelegramSettings
from channels.discord.channel import DiscordChannel
from channels.telegram.channel import TelegramChannel

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
    channel = TelegramChannel(settings)
    await channel.start(ignore_messages, lambda _id, _name: True)
    try:
        yield channel
    finally:
        await channel.stop()


async def ignore_messages(msg: IncomingMessage) -> bool:
    return True


def current(fake: FakeTelegram, message: SentMessage) -> SentMessage:
    """The message as the chat shows it now."""
    return next(m for m in fake.sent if m.message_id == message.message_id)


async def shown_once_edited(fake: FakeTelegram, message: SentMessage) -> SentMessage:
    """The message once the bot has edited it: the answer reaches the waiting question
    first, the edit that shows it follows."""
    deadline = asyncio.get_running_loop().time() + 5
    while not current(fake, message).edits:
        assert asyncio.get_running_loop().time() < deadline, "the question was never edited"
        await asyncio.sleep(0.01)
    return current(fake, message)


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
    after = await shown_once_edited(fake_telegram, message)
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
    after = await shown_once_edited(fake_telegram, message)
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


async def test_telegram_press_in_time_approves_though_telegram_is_slow_to_confirm_it(
    telegram: TelegramChannel, fake_telegram: FakeTelegram
) -> None:
    """The owner presses Approve well before the deadline, and Telegram takes 1.5 s to
    confirm the press: the answer reaches the waiting question at once. It used to wait
    for the toast and the edit, so the deadline passed meanwhile: the turn was denied while
    the owner read "✅ Approved" and the message ended showing it."""
    fake_telegram.gate("answerCallbackQuery", 1.5, stage="after")
    chat = ChatRef("telegram", str(OWNER))
    asking = asyncio.create_task(
        asyncio.wait_for(telegram.ask_approval(chat, QUESTION, owner_only), 1.0)
    )
    message = await question_message(fake_telegram)
    fake_telegram.inject_callback_query(OWNER, message, buttons(message)["Approve"])
    assert await asking == "approve"
    await asyncio.sleep(2.0)  # the toast and the edit land
    assert [a.text for a in fake_telegram.callback_answers] == ["✅ Approved"]
    assert TIMED_OUT not in str(current(fake_telegram, message).plain)


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


async def test_fake_telegram_keyboards_and_callback_answers_behave_like_telegram(
    telegram: TelegramChannel, fake_telegram: FakeTelegram
) -> None:
    """What the approval tests rely on: a press is answered once, a removed keyboard cannot
    be pressed, editMessageReplyMarkup without markup removes the keyboard."""
    bot = telegram.bot
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Go", callback_data="go")]])
    sent = await bot.send_message(OWNER, "pick", reply_markup=keyboard)
    (message,) = fake_telegram.sent
    query = fake_telegram.inject_callback_query(OWNER, message, "go")
    with pytest.raises(ValueError, match="no button"):
        fake_telegram.inject_callback_query(OWNER, message, "not-a-button")

    assert await bot.answer_callback_query(query, text="done")
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query(query, text="again")
    await sent.edit_reply_markup(reply_markup=None)

    assert current(fake_telegram, message).reply_markup is None
    with pytest.raises(ValueError, match="no button"):
        fake_telegram.inject_callback_query(OWNER, message, "go")
    assert [(a.user_id, a.text) for a in fake_telegram.callback_answers] == [(OWNER, "done")]


# -- Discord -----------------------------------------------------------------------------------

TEXT = "5001"  # the text channel of conftest.py's `fake_discord`
EPHEMERAL = 64


async def start_discord(fake: FakeDiscord, workspace: Path) -> DiscordChannel:
    """A started Discord channel on the fake (built as agent/app.py builds it)."""
    settings = DiscordSettings(
        enabled=True,
        bot_token=SecretStr(fake.token),
        allowed_users=[str(OWNER)],
        api_base=fake.api_base,
        gateway_url=fake.gateway_url,
    )
    channel = DiscordChannel(settings)
    await channel.start(ignore_messages, lambda _id, _name: True)
    return channel


@pytest.fixture
async def discord_channel(
    fake_discord: FakeDiscord, tmp_path: Path
) -> AsyncIterator[DiscordChannel]:
    channel = await start_discord(fake_discord, tmp_path)
    try:
        yield channel
    finally:
        await channel.stop()


async def discord_question(fake: FakeDiscord) -> DiscordSentMessage:
    found = await fake.await_for(lambda: [m for m in fake.messages if m.buttons])
    (message,) = found
    return message


def discord_now(fake: FakeDiscord, message: DiscordSentMessage) -> DiscordSentMessage:
    return next(m for m in fake.messages if m.message_id == message.message_id)


async def response_to(fake: FakeDiscord, interaction_id: str) -> dict[str, Any]:
    """The bot's one response to the interaction, once it came."""

    def responses() -> list[dict[str, Any]]:
        found = fake.interaction_responses
        return [r for r in found if r["interaction_id"] == interaction_id]

    (response,) = await fake.await_for(responses)
    return response


@pytest.mark.parametrize(("label", "expected", "outcome"), OUTCOMES)
async def test_discord_owner_press_answers_and_the_message_shows_the_outcome(
    discord_channel: DiscordChannel,
    fake_discord: FakeDiscord,
    label: str,
    expected: ApprovalAnswer,
    outcome: str,
) -> None:
    chat = ChatRef("discord", fake_discord.dm_channel_id(OWNER))
    asking = asyncio.create_task(discord_channel.ask_approval(chat, QUESTION, owner_only))
    message = await discord_question(fake_discord)
    assert (message.channel_id, message.content) == (chat.chat_id, QUESTION.text)
    assert list(message.buttons) == ["Approve", "Deny", "Always allow"]

    pressed = fake_discord.inject_button_press(
        OWNER, message.message_id, message.buttons[label], username="owner"
    )

    assert await asyncio.wait_for(asking, 5) == expected
    assert (await response_to(fake_discord, pressed))["type"] == 7  # the message is updated
    after = discord_now(fake_discord, message)
    assert after.content == f"{QUESTION.text}\n\n{outcome}"
    assert after.buttons == {} and after.components == ()


async def test_discord_stranger_is_refused_privately_and_the_owner_decides(
    discord_channel: DiscordChannel, fake_discord: FakeDiscord
) -> None:
    chat = ChatRef("discord", TEXT)
    asking = asyncio.create_task(discord_channel.ask_approval(chat, QUESTION, owner_only))
    message = await discord_question(fake_discord)
    assert message.channel_id == TEXT

    stranger = fake_discord.inject_button_press(
        STRANGER, message.message_id, message.buttons["Approve"], username="mallory"
    )
    refusal = await response_to(fake_discord, stranger)
    assert refusal["type"] == 4 and refusal["data"]["content"] == NOT_YOURS
    assert refusal["data"]["flags"] & EPHEMERAL  # only the stranger sees it
    assert not asking.done()
    still = discord_now(fake_discord, message)
    assert still.content == QUESTION.text and still.buttons == message.buttons

    owner = fake_discord.inject_button_press(
        OWNER, message.message_id, message.buttons["Approve"], username="owner"
    )
    assert await asyncio.wait_for(asking, 5) == "approve"
    assert (await response_to(fake_discord, owner))["type"] == 7
    after = discord_now(fake_discord, message)
    assert after.content == f"{QUESTION.text}\n\n✅ Approved" and after.buttons == {}


async def test_discord_timeout_turns_the_question_into_a_denial_note(
    discord_channel: DiscordChannel, fake_discord: FakeDiscord
) -> None:
    chat = ChatRef("discord", TEXT)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(discord_channel.ask_approval(chat, QUESTION, owner_only), 1.0)
    (message,) = fake_discord.messages
    assert message.content == f"{QUESTION.text}\n\n{TIMED_OUT}"
    assert message.buttons == {} and message.edits == 1


async def test_discord_press_on_a_question_from_before_a_restart_is_told_it_expired(
    fake_discord: FakeDiscord, tmp_path: Path
) -> None:
    """The bot stopped while the question waited (its buttons stay in the chat); the new
    process answers a press on them privately instead of leaving "interaction failed"."""
    before = await start_discord(fake_discord, tmp_path)
    chat = ChatRef("discord", TEXT)
    asking = asyncio.create_task(before.ask_approval(chat, QUESTION, owner_only))
    message = await discord_question(fake_discord)
    await before.stop()
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    assert discord_now(fake_discord, message).buttons == message.buttons

    after = await start_discord(fake_discord, tmp_path)
    try:
        pressed = fake_discord.inject_button_press(
            OWNER, message.message_id, message.buttons["Approve"]
        )
        response = await response_to(fake_discord, pressed)
    finally:
        await after.stop()
    assert response["type"] == 4 and response["data"]["content"] == EXPIRED
    assert response["data"]["flags"] & EPHEMERAL
    assert discord_now(fake_discord, message).content == QUESTION.text
