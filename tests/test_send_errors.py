"""Every platform error has a known meaning: each row of channels/telegram/send_errors.py and
channels/discord/send_errors.py, with the double answering a send with that error and the
real client library (python-telegram-bot, discord.py) reading it. Each test asserts what the
world holds afterwards: the reply's row and its part's fate in state.db, what the double
received, and the line the courier logged.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from daemon_process import DaemonProcess, env_of, rows, wait_until
from fakes.discord_server import FakeDiscord
from fakes.fault_proxy import FaultProxy
from fakes.llm_server import FakeLLM
from fakes.llm_server import Outcome as LLMOutcome
from fakes.llm_server import text as llm_text
from fakes.telegram_server import FakeTelegram
from pydantic import SecretStr

import channels.telegram.channel as telegram_channel
from agent.app import Store, open_store
from agent.runtime.queues.courier import Courier
from channels.base import ChatRef, Reply
from channels.config import DiscordSettings, TelegramSettings
from channels.discord.channel import DiscordChannel

CHAT = 4242
ANSWER = "the answer"
NEW_TOKEN = "654321:NEW"


@dataclass
class World:
    """What a send left: state.db's rows, what the double got, what was logged."""

    reply: tuple[str, str]  # the outbox row's status and last_error
    parts: list[tuple[str, str]]  # outbox_parts: (status, reason) of each part
    calls: list[int]  # the HTTP status of each sendMessage the double answered
    texts: list[str]  # the messages the chat shows
    log: str


def telegram(fake: FakeTelegram, api_base: str = "", token: str = "") -> Any:
    settings = TelegramSettings(
        bot_token=SecretStr(token or fake.token),
        api_base=api_base or fake.api_base,
        file_api_base=fake.file_api_base,
    )
    return telegram_channel.TelegramChannel(settings)


@pytest.fixture
async def store(tmp_path: Path, state_store: str | None) -> AsyncIterator[Store]:
    opened = await open_store(tmp_path / "state.db", url=state_store)
    yield opened
    await opened.close()


async def deliver(
    channel: Any, store: Store, caplog: pytest.LogCaptureFixture, *, queue: bool = True
) -> None:
    """The reply queued to the Telegram chat (unless `queue` is False: resumed as it is)
    and the courier run until it has nothing more to do."""
    await deliver_to(ChatRef("telegram", str(CHAT)), channel, store, queue=queue)


async def deliver_to(chat: ChatRef, channel: Any, store: Store, *, queue: bool = True) -> None:
    courier = Courier(channel, store.outbox, backoff_s=0.05)
    if queue:
        parts = channel.parts(Reply(ANSWER))
        await store.db.write(
            lambda conn: store.outbox.insert(conn, chat, parts, inbox_id=None, deliver_within_s=60)
        )
        courier.wake(chat.key)
    else:
        await courier.resume()
    await asyncio.sleep(0.05)
    for _ in range(400):
        if not courier.busy:
            break
        await asyncio.sleep(0.05)


async def world(store: Store, fake: FakeTelegram, caplog: pytest.LogCaptureFixture) -> World:
    [reply] = await store.db.fetchall("SELECT status, last_error FROM outbox")
    parts = await store.db.fetchall("SELECT status, reason FROM outbox_parts ORDER BY part")
    calls = [c.status for c in fake.calls if c.method == "sendMessage"]
    texts = [m.plain or "" for m in fake.sent if m.chat_id == CHAT]
    return World(
        (str(reply[0]), str(reply[1])), [tuple(p) for p in parts], calls, texts, caplog.text
    )


@pytest.fixture(autouse=True)
def _logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent.runtime.queues.courier")


# -- Telegram --------------------------------------------------------------------------------

RETRIED = [
    # (the error the double answers with, its description): not sent; sent again once.
    (429, None),
    (409, "Conflict: terminated by other getUpdates request"),
    (500, "Internal Server Error"),
    (502, "Bad Gateway"),
    (503, "Service Unavailable"),
    (504, "Gateway Timeout"),
]


@pytest.mark.parametrize(("status", "description"), RETRIED)
async def test_telegram_an_answer_that_it_was_not_handled_is_sent_again_once(
    status: int, description: str | None, fake_telegram: FakeTelegram, store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    channel = telegram(fake_telegram)
    fake_telegram.fail_next("sendMessage", status, retry_after=1, description=description)
    await deliver(channel, store, caplog)
    found = await world(store, fake_telegram, caplog)
    await channel.bot.shutdown()
    assert found.calls == [status, 200]
    assert found.texts == [ANSWER]
    assert found.reply[0] == "sent" and found.parts == [("sent", "")]
    wait = "1.0" if status == 429 else "0.1"  # retry_after, or the backoff
    assert f"telegram:{CHAT}:: sending again in {wait} s (" in found.log


BLOCKED = "Forbidden: bot was blocked by the user"
REFUSED = [
    # (status, description, parameters, tries, the reason kept: as python-telegram-bot says it)
    (403, BLOCKED, {}, 1, BLOCKED),
    (400, "Bad Request: chat not found", {}, 1, "Chat not found"),
    (400, "Bad Request: message is too long", {}, 2, "Message is too long"),  # HTML, then plain
    (400, "Bad Request: group chat was upgraded to a supergroup chat", {"migrate_to_chat_id": -100},
     1, "Group migrated to supergroup. New chat id: -100"),
]  # fmt: skip


@pytest.mark.parametrize(("status", "description", "parameters", "tries", "reason"), REFUSED)
async def test_telegram_a_refusal_is_stored_refused_and_not_sent_again(
    status: int, description: str, parameters: dict[str, Any], tries: int, reason: str,
    fake_telegram: FakeTelegram, store: Store, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    channel = telegram(fake_telegram)
    fake_telegram.fail_next(
        "sendMessage", status, description=description, times=tries, **parameters
    )
    await deliver(channel, store, caplog)
    found = await world(store, fake_telegram, caplog)
    await channel.bot.shutdown()
    assert found.calls == [status] * tries
    assert found.texts == []
    assert found.reply == ("refused", reason)
    assert found.parts == [("refused", reason)]
    assert f"telegram:{CHAT}:: the platform refused part 1: {reason}" in found.log


@pytest.mark.both_stores
async def test_telegram_a_refused_token_keeps_the_part_for_the_next_token(
    fake_telegram: FakeTelegram, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """401: the token was revoked. Not sent, not given up, not tried again with the same
    token; a channel started with the new token sends it, once."""
    old = telegram(fake_telegram)
    fake_telegram.token = NEW_TOKEN  # @BotFather revoked the old one
    await deliver(old, store, caplog)
    found = await world(store, fake_telegram, caplog)
    await old.bot.shutdown()
    assert found.calls == [401]  # one attempt: nothing more with a refused token
    assert found.reply == ("pending", "token refused: Unauthorized")
    assert found.parts == []  # its attempt removed: surely not sent
    assert (
        f"telegram:{CHAT}:: the platform refused the bot's token (Unauthorized); reply 1 part 1 "
        "was not sent and waits for the channel's next token (agent.env)"
    ) in found.log
    assert "possibly lost" not in found.log
    new = telegram(fake_telegram, token=NEW_TOKEN)
    await deliver(new, store, caplog, queue=False)
    found = await world(store, fake_telegram, caplog)
    await new.bot.shutdown()
    assert found.calls == [401, 200] and found.texts == [ANSWER]
    assert found.reply[0] == "sent" and found.parts == [("sent", "")]


@pytest.mark.both_stores
async def test_telegram_no_answer_after_the_request_was_written_is_possibly_lost(
    fake_telegram: FakeTelegram, store: Store, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A read timeout: Telegram took it and answered late. At most once: not sent again."""
    monkeypatch.setattr(telegram_channel, "SEND_READ_TIMEOUT_S", 0.5)
    channel = telegram(fake_telegram)
    fake_telegram.gate("sendMessage", 1.5, stage="after")
    await deliver(channel, store, caplog)
    await asyncio.sleep(1.5)  # the late answer came and went
    found = await world(store, fake_telegram, caplog)
    await channel.bot.shutdown()
    assert found.texts == [ANSWER] and found.calls == [200]
    assert found.parts[0][0] == "unknown" and found.reply[0] == "sent"
    assert f"telegram:{CHAT}:: part 1 got no answer (Timed out)" in found.log
    assert "reply 1 part 1 possibly lost: it was being sent when no answer came" in found.log


def strike(gate: threading.Event, then: Callable[[], None]) -> threading.Thread:
    """`then` once the double holds the request (from another thread: the loop runs on)."""

    def run() -> None:
        if gate.wait(10):
            time.sleep(0.2)  # the proxy lists the connection a moment after it forwarded
            then()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


async def test_telegram_a_connection_dropped_after_the_request_was_written_is_possibly_lost(
    fake_telegram: FakeTelegram, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with FaultProxy(("127.0.0.1", urlsplit(fake_telegram.api_base).port or 0)) as proxy:
        channel = telegram(fake_telegram, api_base=f"http://127.0.0.1:{proxy.port}/bot")
        held = fake_telegram.gate("sendMessage", 1.0, stage="after")
        striker = strike(held.reached, proxy.drop)
        await deliver(channel, store, caplog)
        striker.join(5)
        found = await world(store, fake_telegram, caplog)
        await channel.bot.shutdown()
    assert found.texts == [ANSWER]  # Telegram had it; pinclaw never heard
    assert found.parts[0][0] == "unknown"
    assert f"telegram:{CHAT}:: part 1 got no answer (httpx.RemoteProtocolError" in found.log
    assert "possibly lost" in found.log


async def test_telegram_a_connection_refused_before_the_request_was_written_is_sent_again(
    fake_telegram: FakeTelegram, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with FaultProxy(("127.0.0.1", urlsplit(fake_telegram.api_base).port or 0)) as proxy:
        channel = telegram(fake_telegram, api_base=f"http://127.0.0.1:{proxy.port}/bot")
        proxy.refuse()
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, proxy.heal)
        await deliver(channel, store, caplog)
        found = await world(store, fake_telegram, caplog)
        await channel.bot.shutdown()
    assert found.calls == [200] and found.texts == [ANSWER]  # the double got it once
    assert found.reply[0] == "sent" and found.parts == [("sent", "")]
    assert f"telegram:{CHAT}:: sending again in 0.1 s (httpx.ConnectError: " in found.log


async def test_telegram_an_edit_to_the_text_it_shows_is_sent(fake_telegram: FakeTelegram) -> None:
    """400 "message is not modified": what was to be seen is there; no error, no resend."""
    channel = telegram(fake_telegram)
    chat = ChatRef("telegram", str(CHAT))
    message = await channel.bot.send_message(CHAT, ANSWER)
    assert await channel.send_text(chat, ANSWER, "", edit=message) is None
    await channel.bot.shutdown()
    edits = [c for c in fake_telegram.calls if c.method == "editMessageText"]
    assert [(c.status, c.description) for c in edits] == [
        (400, "Bad Request: message is not modified: specified new message content and "
         "reply markup are exactly the same as a current content and reply markup of the "
         "message")
    ]  # fmt: skip
    assert [m.plain for m in fake_telegram.sent] == [ANSWER]


# -- Discord ---------------------------------------------------------------------------------

PLACE = "5001"  # the fake guild's text channel


@pytest.fixture
async def discord_channel(fake_discord: FakeDiscord) -> AsyncIterator[DiscordChannel]:
    settings = DiscordSettings(
        enabled=True,
        bot_token=SecretStr(fake_discord.token),
        api_base=fake_discord.api_base,
        gateway_url=fake_discord.gateway_url,
    )
    channel = DiscordChannel(settings)

    async def submit(_message: Any) -> bool:
        return True

    await channel.start(submit, lambda _id, _name: False)
    yield channel
    await channel.stop()


async def deliver_discord(channel: DiscordChannel, store: Store, *, queue: bool = True) -> None:
    await deliver_to(ChatRef("discord", PLACE), channel, store, queue=queue)


async def discord_world(store: Store, fake: FakeDiscord, caplog: pytest.LogCaptureFixture) -> World:
    [reply] = await store.db.fetchall("SELECT status, last_error FROM outbox")
    parts = await store.db.fetchall("SELECT status, reason FROM outbox_parts ORDER BY part")
    calls = [c.status for c in fake.calls if c.method == "POST" and c.path.endswith("/messages")]
    texts = [m.content for m in fake.messages if m.channel_id == PLACE]
    return World(
        (str(reply[0]), str(reply[1])), [tuple(p) for p in parts], calls, texts, caplog.text
    )


DISCORD_REFUSED = [
    (403, "Cannot send messages to this user", 50007),
    (404, "Unknown Channel", 10003),
    (400, "Invalid Form Body", 50035),
]


@pytest.mark.parametrize(("status", "message", "code"), DISCORD_REFUSED)
async def test_discord_a_refusal_is_stored_refused_and_not_sent_again(
    status: int, message: str, code: int, fake_discord: FakeDiscord,
    discord_channel: DiscordChannel, store: Store, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fake_discord.fail_next(status, message, code)
    await deliver_discord(discord_channel, store)
    found = await discord_world(store, fake_discord, caplog)
    phrase = {403: "Forbidden", 404: "Not Found", 400: "Bad Request"}[status]
    reason = f"{status} {phrase} (error code: {code}): {message}"
    assert found.calls == [status] and found.texts == []
    assert found.reply == ("refused", reason) and found.parts == [("refused", reason)]
    assert f"discord:{PLACE}:: the platform refused part 1: {reason}" in found.log


async def test_discord_a_refused_token_keeps_the_part_for_the_next_token(
    fake_discord: FakeDiscord, discord_channel: DiscordChannel, store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """401: the token was reset in the developer portal. Not sent, not given up."""
    fake_discord.token = "NEW.TOKEN"
    await deliver_discord(discord_channel, store)
    found = await discord_world(store, fake_discord, caplog)
    reason = "401 Unauthorized (error code: 0): 401: Unauthorized"
    assert found.calls == [401] and found.texts == []
    assert found.reply == ("pending", f"token refused: {reason}") and found.parts == []
    assert f"discord:{PLACE}:: the platform refused the bot's token ({reason})" in found.log


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [(429, {"Via": "1.1 google"}, 0.2), (429, {}, None)],
    ids=["rate limit waited out by discord.py", "cloudflare block"],
)
async def test_discord_too_many_requests_is_sent_once_after_the_wait(
    status: int, headers: dict[str, str], retry_after: float | None, fake_discord: FakeDiscord,
    discord_channel: DiscordChannel, store: Store, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fake_discord.fail_next(status, "You are being rate limited.", headers=headers,
                           retry_after=retry_after)  # fmt: skip
    await deliver_discord(discord_channel, store)
    found = await discord_world(store, fake_discord, caplog)
    assert found.calls == [429, 200] and found.texts == [ANSWER]
    assert found.reply[0] == "sent" and found.parts == [("sent", "")]
    said = f"discord:{PLACE}:: sending again in 0.1 s (429 Too Many Requests"
    assert (said in found.log) == (not headers)  # discord.py waited the first out itself


async def test_discord_a_server_error_is_unknown_and_the_nonce_makes_the_resend_safe(
    fake_discord: FakeDiscord,
    discord_channel: DiscordChannel,
    store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """503: Discord documents no outcome, so the part may exist; within the nonce window it
    is sent again with the same nonce, and arrives once."""
    fake_discord.fail_next(503, "Service Unavailable")
    await deliver_discord(discord_channel, store)
    found = await discord_world(store, fake_discord, caplog)
    assert found.calls == [503, 200] and found.texts == [ANSWER]
    assert found.reply[0] == "sent" and found.parts == [("sent", "")]
    assert f"discord:{PLACE}:: part 1 got no answer (503 Service Unavailable" in found.log


async def test_discord_no_answer_after_the_request_was_written_is_sent_again_once(
    fake_discord: FakeDiscord, discord_channel: DiscordChannel, store: Store,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The message was created and the answer did not come (the client's timeout): the
    resend carries the same nonce and Discord answers it with the first message."""
    http = discord_channel._client.http
    fake_discord.gate(1.5, stage="after")

    async def quick(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.wait_for(original(*args, **kwargs), 0.5)

    original = http.request
    monkeypatch.setattr(http, "request", quick)
    await deliver_discord(discord_channel, store)
    found = await discord_world(store, fake_discord, caplog)
    assert found.texts == [ANSWER] and fake_discord.deduplicated == 1
    assert found.reply[0] == "sent" and found.parts == [("sent", "")]
    assert f"discord:{PLACE}:: part 1 got no answer (TimeoutError: " in found.log


# -- the daemon: a token revoked between a turn's end and its send, then replaced -------------


def test_a_reply_refused_for_a_revoked_token_is_sent_once_with_the_new_one(
    telegram_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    owner = 42
    monkeypatch.delenv("PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN")
    home.mkdir(parents=True)
    env_file = home / "agent.env"
    env_file.write_text(f"PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN={fake_telegram.token}\n")

    def answer_then_revoke(body: dict[str, Any]) -> LLMOutcome:
        fake_telegram.token = NEW_TOKEN  # @BotFather revokes the old token as the turn ends
        return llm_text("The pump ran for 10 minutes.")

    fake_llm.responder = answer_then_revoke
    daemon = DaemonProcess(env_of(), tmp_path / "run.log").start()
    try:
        daemon.wait_ready()
        fake_telegram.inject_message(owner, owner, "how long did the pump run?")
        waits = "waits for the channel's next token (agent.env)"
        wait_until(lambda: waits in daemon.log, 30, "the refusal", daemon)
        db = home / "state.db"
        assert rows(db, "SELECT status FROM outbox") == [("pending",)]
        env_file.write_text(f"PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN={NEW_TOKEN}\n")
        fake_telegram.wait_for(lambda m: m.chat_id == owner, timeout=30)
        time.sleep(1.0)  # nothing more comes
        assert [m.plain for m in fake_telegram.sent if m.chat_id == owner] == [
            "The pump ran for 10 minutes."
        ]
        sends = [c.status for c in fake_telegram.calls if c.method == "sendMessage"]
        assert sends == [401, 200]  # once refused (the old token), once sent (the new one)
        assert rows(db, "SELECT status FROM outbox") == [("sent",)]
        assert rows(db, "SELECT status, sends FROM outbox_parts") == [("sent", 1)]
        assert "telegram restarted for: channels.telegram.bot_token" in daemon.log
        assert "possibly lost" not in daemon.log
        assert len(fake_llm.requests) == 1  # the turn ran once
    finally:
        daemon.ensure_stopped()
