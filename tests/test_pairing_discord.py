"""Pairing on Discord, through the same code path as on Telegram: discord.py against the fake
REST API and gateway, the daemon in this event loop, the model double. The owner's question
goes to the DM they last wrote in, with Approve / Deny buttons."""

from __future__ import annotations

import re
from collections.abc import Callable

from conftest import Daemon
from fakes.discord_server import FakeDiscord, SentMessage
from fakes.model_double import ScriptedModel

from agent.durable.owner import pairings

OWNER, STRANGER = "111", "777"  # the owner ([people], allowed); nobody
CODE = re.compile(r"\b[A-Z0-9]{4}-[A-Z0-9]{4}\b")


def sent_in(fake: FakeDiscord, channel_id: str) -> list[SentMessage]:
    return [m for m in fake.messages if m.channel_id == channel_id]


async def said_in(fake: FakeDiscord, channel_id: str, containing: str) -> SentMessage:
    found = await fake.await_for(
        lambda: [m for m in sent_in(fake, channel_id) if containing in m.content], 10.0
    )
    return found[-1]


async def test_a_stranger_pairs_by_dm_and_the_owner_approves_in_their_dm(
    discord_model_env: dict[str, str],
    owner_is_42: None,
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    daemon: Callable[[], Daemon],
) -> None:
    owner_dm, stranger_dm = fake_discord.dm_channel_id(OWNER), fake_discord.dm_channel_id(STRANGER)
    async with daemon():
        fake_discord.inject_dm(OWNER, "good morning", username="owner")  # their DM is known
        await said_in(fake_discord, owner_dm, "echo: ")
        fake_discord.inject_dm(STRANGER, "hi, I'm Mallory", username="mallory")
        code = CODE.search((await said_in(fake_discord, stranger_dm, "pairing code")).content)
        assert code is not None
        question = await said_in(fake_discord, owner_dm, code.group())
        assert list(question.buttons) == ["Approve", "Deny"]
        assert "discord id 777) wants to talk to me" in question.content

        fake_discord.inject_button_press(OWNER, question.message_id, question.buttons["Approve"])
        await said_in(fake_discord, stranger_dm, pairings.WELCOME)
        fake_discord.inject_dm(STRANGER, "what can you do?", username="mallory")
        answer = await said_in(fake_discord, stranger_dm, "echo: ")
    assert "what can you do?" in answer.content
    assert len(model.requests) == 2  # the owner's and the paired stranger's, nothing before
