"""Reactions (issue 40): the person sees their message taken (👀), worked on (✍️) and
answered (✅) or failed (❌), on Telegram through setMessageReaction (which offers no ✅ or
❌: 👌 and 👎 there) and on Discord as the bot's own reaction, one standing at a time;
`[channels] reactions = []` turns them off. The daemon on each double with the model double.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from conftest import Daemon
from fakes.discord_server import FakeDiscord
from fakes.model_double import ScriptedModel, error
from fakes.telegram_server import FakeTelegram

CHAT = 42


async def settled(read: Callable[[], list[str]], last: str) -> list[str]:
    """What `read` shows once its last entry is `last` (reactions go out in the background)."""
    for _ in range(500):
        if (found := read()) and found[-1] == last:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {last!r} in {read()}")


async def test_telegram_message_taken_worked_on_and_answered(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        asked = fake_telegram.inject_message(CHAT, CHAT, "hello")
        await fake_telegram.await_for(lambda m: m.chat_id == CHAT)

        def on_asked() -> list[str]:
            return [e for c, m, e in fake_telegram.reactions if (c, m) == (CHAT, asked)]

        assert await settled(on_asked, "👌") == ["👀", "✍", "👌"]


async def test_telegram_failed_turn_is_marked_failed(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
) -> None:
    refused = error(400, "this request is refused")
    model.script(refused, refused)  # the second: after the delivery note moved into the message
    async with daemon():
        asked = fake_telegram.inject_message(CHAT, CHAT, "hello")
        (said,) = await fake_telegram.await_for(lambda m: m.chat_id == CHAT)

        def on_asked() -> list[str]:
            return [e for c, m, e in fake_telegram.reactions if (c, m) == (CHAT, asked)]

        assert await settled(on_asked, "👎") == ["👀", "✍", "👎"]
    assert (said.plain or "").startswith("Sorry, I could not answer that just now")


async def test_no_reactions_when_turned_off(
    telegram_model_env: dict[str, str],
    model: ScriptedModel,
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__REACTIONS", "[]")
    async with daemon():
        fake_telegram.inject_message(CHAT, CHAT, "hello")
        await fake_telegram.await_for(lambda m: m.chat_id == CHAT)
    assert fake_telegram.reactions == []


async def test_discord_reactions_one_at_a_time(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    daemon: Callable[[], Daemon],
) -> None:
    async with daemon():
        asked = fake_discord.inject_dm("111", "hello")

        def on_asked() -> list[str]:
            return [f"{sign}{e}" for m, sign, e in fake_discord.reactions if m == asked]

        changes = await settled(on_asked, "-✍️")
    assert changes == ["+👀", "+✍️", "-👀", "+✅", "-✍️"]
