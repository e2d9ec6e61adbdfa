"""Telegram's webhook mode through the daemon in this event loop: the fake Bot API records
setWebhook (and refuses getUpdates meanwhile, as Telegram does); the tests post updates made
with python-telegram-bot's own classes to pinclaw's HTTP server, as Telegram would, with and
without the secret token it was given, and assert what the chat shows and state.db holds."""

from __future__ import annotations

import datetime
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from conftest import Daemon
from fakes.model_double import ScriptedModel
from fakes.telegram_server import FakeTelegram
from telegram import Chat, Message, Update, User

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def url(telegram_model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    port = free_port()
    for name, value in {
        "PINCLAW_HTTP__ENABLED": "true",
        "PINCLAW_HTTP__PORT": str(port),
        "PINCLAW_CHANNELS__TELEGRAM__MODE": "webhook",
        "PINCLAW_CHANNELS__TELEGRAM__WEBHOOK_URL": "https://bot.example.org/channels/telegram/webhook",
    }.items():
        monkeypatch.setenv(name, value)
    return f"http://127.0.0.1:{port}/channels/telegram/webhook"


def update(update_id: int, text: str, *, user_id: int = 42) -> bytes:
    """An update as Telegram posts it, made and serialised by python-telegram-bot."""
    user = User(user_id, "Ada", is_bot=False)
    sent = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    message = Message(
        1000 + update_id, sent, Chat(user_id, Chat.PRIVATE), from_user=user, text=text
    )
    return Update(update_id, message=message).to_json().encode()


def inbox(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "state.db") as db:
        return db.execute(
            "SELECT message_id, json_extract(message, '$.text') FROM inbox"
        ).fetchall()


async def test_updates_posted_with_the_secret_are_answered_once(
    model: ScriptedModel,
    daemon: Callable[[], Daemon],
    fake_telegram: FakeTelegram,
    url: str,
    home: Path,
) -> None:
    async with daemon(), httpx.AsyncClient(timeout=10) as client:
        hook = fake_telegram.webhook
        assert (
            hook is not None and hook["url"] == "https://bot.example.org/channels/telegram/webhook"
        )
        assert hook["allowed_updates"] == ["message", "callback_query"]
        secret = {SECRET_HEADER: hook["secret_token"], "Content-Type": "application/json"}
        forged = await client.post(
            url, content=update(7, "forged"), headers={**secret, SECRET_HEADER: "guess"}
        )
        unsigned = await client.post(
            url, content=update(8, "unsigned"), headers={"Content-Type": "application/json"}
        )
        garbled = await client.post(  # not UTF-8: aiohttp reads it with surrogateescape
            url, content=update(6, "garbled"), headers={**secret, SECRET_HEADER: b"\xff"}
        )
        taken = await client.post(url, content=update(9, "water the basil"), headers=secret)
        stored_before_200 = inbox(home)
        again = await client.post(url, content=update(9, "water the basil"), headers=secret)
        (reply,) = await fake_telegram.await_for(lambda m: m.chat_id == 42, timeout=10)
    answered = [forged, unsigned, garbled, taken, again]
    assert [r.status_code for r in answered] == [401, 401, 401, 200, 200]
    assert stored_before_200 == [("1009", "water the basil")]
    assert reply.text.startswith("echo: ") and reply.text.endswith("water the basil")
    assert len(model.requests) == 1  # Telegram's retry of the same update: not run twice
    assert fake_telegram.webhook is None  # deleteWebhook at stop
    assert not [c for c in fake_telegram.calls if c.method == "getUpdates"]  # no polling


def test_webhook_mode_needs_an_https_url(home: Path, tmp_path: Path) -> None:
    from agent.config import ConfigError, load_settings

    config = tmp_path / "config.toml"
    config.write_text(
        '[channels.telegram]\nmode = "webhook"\nwebhook_url = "http://bot.example.org"\n'
    )
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    assert 'mode = "webhook" needs webhook_url = "https://..."' in str(refused.value)
