"""Chatting on Discord, end to end: discord.py against the fake REST API and gateway, the
daemon in between, the in-process model double as the model. A streamed reply, a recording
transcribed and a fact that follows its person into `agent run -m` go through LiteLLM to the
fake provider, end to end."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import Daemon
from fakes.discord_server import FakeDiscord, SentMessage
from fakes.endless_file import endless_file
from fakes.llm_server import FakeLLM, last_user_content
from fakes.model_double import ScriptedModel, text
from fakes.telegram_server import FakeTelegram

from channels.discord.cdn import fetch_from_cdn
from channels.discord.interactions import KEPT_S, PendingInteractions

OWNER = "111"
STRANGER = "777"
BOT = "1000"
GUILD, TEXT, THREAD, OTHER = "5000", "5001", "5002", "5003"
COMMANDS = {"new", "stop", "status", "jobs", "model", "voice", "usage", "budget", "pair", "busy"}
COMMANDS.add("help")


@pytest.fixture
def fake_discord() -> Iterator[FakeDiscord]:
    """Guild 5000: text channels 5001 ("general") and 5003 ("random"), thread 5002 in 5001."""
    with FakeDiscord(bot_id=BOT) as server:
        thread = {"id": THREAD, "name": "a-thread", "type": "thread", "parent_id": TEXT}
        general = {"id": TEXT, "name": "general"}
        random = {"id": OTHER, "name": "random"}
        server.add_guild(GUILD, "test-guild", channels=[general, thread, random])
        yield server


Serving = Callable[[], contextlib.AbstractAsyncContextManager[Daemon]]


@pytest.fixture
def serving(daemon: Callable[[], Daemon]) -> Serving:
    """The daemon, from when the Discord channel has started (`Daemon` waits for it)."""
    return daemon


def sent_in(fake: FakeDiscord, channel_id: str) -> list[SentMessage]:
    return [m for m in fake.messages if m.channel_id == channel_id]


def answered(fake: FakeDiscord, interaction_id: str) -> bool:
    """Whether the bot has answered the interaction (its callback)."""
    return any(r["interaction_id"] == interaction_id for r in fake.interaction_responses)


async def replies(
    fake: FakeDiscord, channel_id: str, count: int = 1, within_s: float = 10.0
) -> list[SentMessage]:
    """The first `count` messages the bot sent in `channel_id`, waiting for them."""
    found = await fake.await_for(
        lambda: len(sent_in(fake, channel_id)) >= count and sent_in(fake, channel_id), within_s
    )
    return found[:count]


def roles(request: dict[str, Any]) -> list[str]:
    return [m["role"] for m in request["messages"]]


# -- direct messages ---------------------------------------------------------------------------


async def test_dm_is_answered_as_a_reply_once(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    async with serving() as running:
        asked = fake_discord.inject_dm(OWNER, "hello there", username="alice")
        dm = fake_discord.dm_channel_id(OWNER)
        [reply] = await replies(fake_discord, dm)
        await asyncio.sleep(0.5)  # the bot's own echoed message must not start a turn
    assert running.exit_code == 0
    assert reply.content.startswith("echo: ") and reply.content.endswith("hello there")
    assert reply.reply_to == asked
    assert len(sent_in(fake_discord, dm)) == 1
    [request] = model.requests
    assert "| discord | from alice" in last_user_content(request)
    intents = (fake_discord.last_identify or {})["intents"]
    for bit in (0, 9, 12, 15):  # guilds, guild messages, direct messages, message content
        assert intents & (1 << bit), f"intent bit {bit} missing from {intents:#x}"
    assert not any(fake_discord.commands.values())  # register_slash_commands is off


async def test_typing_is_shown_while_the_turn_runs(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        model.script(text("done thinking", delay_s=0.6))
        fake_discord.inject_dm(OWNER, "think a little")
        [reply] = await replies(fake_discord, dm)
    assert reply.content == "done thinking"
    assert dm in fake_discord.typing


async def test_stranger_gets_one_reply_and_the_model_is_never_called(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(STRANGER)
    async with serving():
        fake_discord.inject_guild_message(GUILD, TEXT, STRANGER, "hello", mention_bot=True)
        asked = fake_discord.inject_dm(STRANGER, "hi, who are you?", username="mallory")
        [reply] = await replies(fake_discord, dm)
        await asyncio.sleep(0.5)
    assert STRANGER in reply.content and "allowed_users" in reply.content
    assert reply.reply_to == asked
    assert len(sent_in(fake_discord, dm)) == 1
    assert sent_in(fake_discord, TEXT) == []  # silence in a server
    assert model.requests == []


async def test_a_strangers_files_are_not_saved(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    home: Path,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(STRANGER)
    async with serving():
        fake_discord.inject_guild_message(
            GUILD,
            TEXT,
            STRANGER,
            "take this",
            mention_bot=True,
            attachments=[("payload.sh", b"rm -rf ~")],
        )
        fake_discord.inject_dm(STRANGER, "and this", attachments=[("big.bin", b"x" * 1000)])
        await replies(fake_discord, dm)
        await asyncio.sleep(0.3)
    assert sorted(p.name for p in (home / "workspace").glob("inbox/*")) == []
    assert model.requests == []


async def test_other_bots_are_never_answered(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__ALLOWED_USERS", f'["{OWNER}", "333"]')
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__GUILD_MODE", "all")
    async with serving():
        fake_discord.inject_dm("333", "hello bot", username="otherbot", bot=True)
        fake_discord.inject_guild_message(GUILD, TEXT, "333", "hi", bot=True, mention_bot=True)
        fake_discord.inject_dm(OWNER, "ping")
        await replies(fake_discord, fake_discord.dm_channel_id(OWNER))
        await asyncio.sleep(0.5)
    assert sent_in(fake_discord, fake_discord.dm_channel_id("333")) == []
    assert sent_in(fake_discord, TEXT) == []
    assert [last_user_content(r).rsplit("\n", 1)[-1] for r in model.requests] == ["ping"]


# -- servers -----------------------------------------------------------------------------------


async def test_in_a_server_only_the_mention_or_reply_is_answered(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    async with serving():
        fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "just chatting")
        model.script(text("It is **noon**."))
        asked = fake_discord.inject_guild_message(
            GUILD, TEXT, OWNER, "what time is it?", mention_bot=True, username="alice"
        )
        [first] = await replies(fake_discord, TEXT)
        answer = fake_discord.inject_guild_message(
            GUILD, TEXT, OWNER, "and you?", reply_to_message_id=first.message_id
        )
        second = (await replies(fake_discord, TEXT, count=2))[1]
        await asyncio.sleep(0.5)
    assert (first.reply_to, first.content) == (asked, "It is **noon**.")  # Markdown kept
    assert second.reply_to == answer and second.content.endswith("and you?")
    assert len(sent_in(fake_discord, TEXT)) == 2
    assert len(model.requests) == 2
    seen = last_user_content(model.requests[0])
    assert seen.endswith("\nwhat time is it?") and f"<@{BOT}>" not in seen
    assert "discord group" in seen


async def test_guild_mode_all_answers_every_message_but_not_itself(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__GUILD_MODE", "all")
    async with serving():
        asked = fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "anyone here?")
        [reply] = await replies(fake_discord, TEXT)
        await asyncio.sleep(0.5)
    assert reply.reply_to == asked and reply.content.endswith("anyone here?")
    assert len(sent_in(fake_discord, TEXT)) == 1
    assert len(model.requests) == 1


async def test_allowed_guilds_restricts_servers_but_not_dms(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__ALLOWED_GUILDS", f'["{GUILD}"]')
    fake_discord.add_guild("6000", "elsewhere", channels=["6001"])
    async with serving():
        fake_discord.inject_guild_message("6000", "6001", OWNER, "over here", mention_bot=True)
        fake_discord.inject_guild_message(
            GUILD, TEXT, OWNER, "in the allowed one", mention_bot=True
        )
        fake_discord.inject_dm(OWNER, "and a DM")
        await replies(fake_discord, TEXT)
        await replies(fake_discord, fake_discord.dm_channel_id(OWNER))
        await asyncio.sleep(0.5)
    assert sent_in(fake_discord, "6001") == []
    assert len(model.requests) == 2


async def test_allowed_channels_restricts_server_channels_but_not_dms(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__ALLOWED_CHANNELS", f'["{OTHER}"]')
    async with serving():
        fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "not here", mention_bot=True)
        fake_discord.inject_guild_message(GUILD, OTHER, OWNER, "but here", mention_bot=True)
        fake_discord.inject_dm(OWNER, "and a DM")
        await replies(fake_discord, OTHER)
        await replies(fake_discord, fake_discord.dm_channel_id(OWNER))
        await asyncio.sleep(0.5)
    assert sent_in(fake_discord, TEXT) == []
    assert len(model.requests) == 2


async def test_a_thread_has_its_own_history(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "remember kiwi", mention_bot=True)
        await replies(fake_discord, TEXT)
        asked = fake_discord.inject_guild_message(
            GUILD, THREAD, OWNER, "what word?", mention_bot=True, thread=True
        )
        [in_thread] = await replies(fake_discord, THREAD)
        fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "and now?", mention_bot=True)
        await replies(fake_discord, TEXT, count=2)
        fake_discord.inject_dm(OWNER, "in private")
        await replies(fake_discord, dm)
    assert in_thread.reply_to == asked and in_thread.content.endswith("what word?")
    channel_1, thread, channel_2, private = model.requests
    assert roles(channel_1) == roles(thread) == roles(private) == ["system", "user", "system"]
    assert roles(channel_2) == ["system", "user", "assistant", "user", "system"]
    assert "remember kiwi" in channel_2["messages"][1]["content"]


# -- replies -----------------------------------------------------------------------------------


async def test_long_reply_is_split_into_valid_messages(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    paragraphs = [
        f"Paragraph {i}: " + " ".join(["lorem ipsum dolor sit amet"] * 18) for i in range(10)
    ]
    long_reply = "\n\n".join(paragraphs)
    assert 4_900 < len(long_reply) < 5_100
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        model.script(text(long_reply))
        asked = fake_discord.inject_dm(OWNER, "write a lot")
        await replies(fake_discord, dm, count=3)
        await fake_discord.await_for(
            lambda: "\n\n".join(p.content for p in sent_in(fake_discord, dm)) == long_reply
        )
    parts = sent_in(fake_discord, dm)
    assert len(parts) >= 3
    assert all(len(p.content) <= 2000 for p in parts)
    assert "\n\n".join(p.content for p in parts) == long_reply
    assert parts[0].reply_to == asked


async def test_long_code_block_is_closed_and_reopened(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    code = [f"print('line {i:03} of a long listing, padded out')" for i in range(100)]
    reply = "Here it is:\n\n```python\n" + "\n".join(code) + "\n```"
    assert len(reply) > 4_000
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        model.script(text(reply))
        fake_discord.inject_dm(OWNER, "a long listing please")
        await replies(fake_discord, dm, count=3)
        await fake_discord.await_for(  # the last line of the listing
            lambda: [m for m in sent_in(fake_discord, dm) if "'line 099" in m.content]
        )
    parts = [p.content for p in sent_in(fake_discord, dm)]
    assert all(len(p) <= 2000 for p in parts)
    for part in parts:
        fences = [line for line in part.split("\n") if line.startswith("```")]
        assert len(fences) % 2 == 0, part  # every part renders on its own
        assert all(f in ("```python", "```") for f in fences)
        if fences:
            assert fences[0] == "```python"
    lines = [line for p in parts for line in p.split("\n") if line.startswith("print(")]
    assert lines == code


async def test_reply_with_image_marker_arrives_as_attachment(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    home: Path,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        (home / "workspace" / "chart.png").write_bytes(b"\x89PNG fake chart")
        model.script(text("Here is the chart.\n[IMAGE:chart.png]"))
        asked = fake_discord.inject_dm(OWNER, "show me the chart")
        await fake_discord.await_for(
            lambda: (
                [m for m in sent_in(fake_discord, dm) if m.attachments]
                and [m for m in sent_in(fake_discord, dm) if m.content == "Here is the chart."]
            ),
            timeout=10,
        )
    sent = sent_in(fake_discord, dm)
    files = [f for m in sent for f in m.attachments]
    assert files == [("chart.png", b"\x89PNG fake chart")]
    texts = [m.content for m in sent if m.content]
    assert texts == ["Here is the chart."]
    assert "[IMAGE" not in "".join(m.content for m in sent)
    assert sent[0].reply_to == asked


async def test_marker_outside_workspace_is_refused_and_text_still_arrives(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        model.script(text("Sure.\n[DOCUMENT:/etc/hostname]"))
        fake_discord.inject_dm(OWNER, "send the hostname file")
        [reply] = await replies(fake_discord, dm)
    # A file sent after it would be sent before the daemon stops: stopping lets sending finish.
    assert reply.content.startswith("Sure.")
    assert "Could not send /etc/hostname: it is outside the workspace" in reply.content
    assert not [m for m in fake_discord.messages if m.attachments]


async def test_file_over_the_upload_limit_is_reported_not_sent(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    home: Path,
    serving: Serving,
) -> None:
    fake_discord.upload_limit = 1024
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        (home / "workspace" / "big.bin").write_bytes(b"x" * 4096)
        model.script(text("The dump:\n[DOCUMENT:big.bin]"))
        fake_discord.inject_dm(OWNER, "send the dump")

        def said() -> str:
            return "\n".join(m.content for m in sent_in(fake_discord, dm))

        await fake_discord.await_for(lambda: "big.bin" in said() and "The dump:" in said(), 10)
    sent = sent_in(fake_discord, dm)
    assert "The dump:" in "\n".join(m.content for m in sent)
    assert not [m for m in sent if m.attachments]


async def test_incoming_attachments_are_saved_and_referenced(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    home: Path,
    serving: Serving,
) -> None:
    async with serving():
        fake_discord.inject_dm(
            OWNER,
            "what are these?",
            attachments=[("photo.png", b"PNGDATA"), ("notes.txt", b"my notes")],
        )
        await replies(fake_discord, fake_discord.dm_channel_id(OWNER))
    seen = last_user_content(model.requests[0])
    assert "what are these?" in seen
    markers = {
        line.split(":", 1)[0][1:]: line.split(":", 1)[1][:-1]
        for line in seen.splitlines()
        if line.startswith(("[IMAGE:", "[DOCUMENT:"))
    }
    assert set(markers) == {"IMAGE", "DOCUMENT"}
    assert all(path.startswith("inbox/") for path in markers.values())
    assert (home / "workspace" / markers["IMAGE"]).read_bytes() == b"PNGDATA"
    assert (home / "workspace" / markers["DOCUMENT"]).read_bytes() == b"my notes"


async def test_streamed_reply_is_one_message_edited_then_finished(
    discord_env: dict[str, str],
    fake_llm: FakeLLM,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__STREAM_REPLIES", "true")
    final = "A **streamed** answer in several pieces"
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        fake_llm.script(text(final))
        asked = fake_discord.inject_dm(OWNER, "stream please")
        await fake_discord.await_for(
            lambda: [m for m in sent_in(fake_discord, dm) if m.content == final], timeout=10
        )
    # Anything more would be sent before the daemon stops: stopping lets sending finish.
    [message] = sent_in(fake_discord, dm)
    assert message.content == final and message.reply_to == asked
    # the pieces arrive within milliseconds: at most one throttled edit, then the final one
    assert message.edits <= 2
    assert fake_llm.requests[0].get("stream") is True


async def test_prompt_is_identical_across_turns_and_delivery_follows_user(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        fake_discord.inject_dm(OWNER, "first")
        await replies(fake_discord, dm)
        fake_discord.inject_dm(OWNER, "second")
        await replies(fake_discord, dm, count=2)
    one, two = model.requests
    prompt = one["messages"][0]["content"]
    assert one["messages"][0]["role"] == two["messages"][0]["role"] == "system"
    assert prompt == two["messages"][0]["content"]
    capabilities = prompt.split("## Channel Capabilities", 1)[1].split("\n## ", 1)[0]
    assert "Discord" in capabilities and "2,000" in capabilities
    assert "Telegram" not in prompt
    for request in (one, two):
        *_, user, delivery = request["messages"]
        assert user["role"] == "user"
        assert delivery["role"] == "system" and "Discord" in delivery["content"]
        assert "[IMAGE:<path-or-url>]" in delivery["content"]
    assert roles(two) == ["system", "user", "assistant", "user", "system"]


# -- commands ----------------------------------------------------------------------------------


async def test_text_commands_are_answered_without_the_model(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        asked = fake_discord.inject_dm(OWNER, "/help")
        [help_reply] = await replies(fake_discord, dm)
        fake_discord.inject_dm(OWNER, "/status")
        status = (await replies(fake_discord, dm, count=2))[1]
        fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "/status", mention_bot=True)
        [in_server] = await replies(fake_discord, TEXT)
    assert help_reply.reply_to == asked
    assert all(f"/{name}" in help_reply.content for name in COMMANDS)
    assert "Model: openai/test-model" in status.content
    assert "Model: openai/test-model" in in_server.content
    assert model.requests == []


async def test_new_clears_the_history(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        fake_discord.inject_dm(OWNER, "remember the word kiwi")
        await replies(fake_discord, dm)
        fake_discord.inject_dm(OWNER, "/new")
        fresh = (await replies(fake_discord, dm, count=2))[1]
        fake_discord.inject_dm(OWNER, "anything?")
        await replies(fake_discord, dm, count=3)
    assert fresh.content == "Started a fresh conversation."
    assert roles(model.requests[1]) == ["system", "user", "system"]


async def test_stop_cancels_a_slow_turn(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        model.script(text("too late", delay_s=10))
        fake_discord.inject_dm(OWNER, "think hard")
        await fake_discord.await_for(lambda: model.requests)
        fake_discord.inject_dm(OWNER, "/stop")
        sent = await replies(fake_discord, dm, count=2)
    assert {m.content for m in sent} == {"Stopping.", "Stopped."}


async def test_slash_commands_are_registered_and_answered(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__REGISTER_SLASH_COMMANDS", "true")

    def registered() -> list[dict[str, Any]]:
        for commands in fake_discord.commands.values():
            if {c["name"] for c in commands} == COMMANDS:
                return commands
        return []

    async with serving():
        commands = await fake_discord.await_for(registered, timeout=10)
        fake_discord.inject_slash_command(OWNER, "status")
        [status] = await replies(fake_discord, fake_discord.dm_channel_id(OWNER))
        fake_discord.inject_slash_command(OWNER, "help", guild_id=GUILD, channel_id=TEXT)
        [help_reply] = await replies(fake_discord, TEXT)
    assert len(commands) == len(COMMANDS)
    assert all(1 <= len(c["description"]) <= 100 for c in commands)  # Discord requires one
    assert "Model: openai/test-model" in status.content
    assert all(f"/{name}" in help_reply.content for name in COMMANDS)
    assert len(fake_discord.interaction_responses) == 2  # each acknowledged once
    assert model.requests == []


async def test_a_strangers_slash_command_is_refused_and_takes_no_later_reply(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__REGISTER_SLASH_COMMANDS", "true")
    async with serving():
        fake_discord.inject_slash_command(STRANGER, "status")
        [refusal] = await replies(fake_discord, fake_discord.dm_channel_id(STRANGER))
        helped = fake_discord.inject_slash_command(
            STRANGER, "help", guild_id=GUILD, channel_id=TEXT
        )
        await fake_discord.await_for(lambda: answered(fake_discord, helped))  # refused, privately
        asked = fake_discord.inject_guild_message(GUILD, TEXT, OWNER, "hello", mention_bot=True)
        [reply] = await fake_discord.await_for(
            lambda: [m for m in sent_in(fake_discord, TEXT) if m.content.endswith("hello")]
        )
    assert STRANGER in refusal.content and "allowed_users" in refusal.content
    assert reply.reply_to == asked  # a reply to the owner, not the stranger's command answer
    in_server = [m for m in sent_in(fake_discord, TEXT) if m is not reply]
    assert all(int(m.payload.get("flags") or 0) & 64 for m in in_server)  # silence: ephemeral
    assert len(model.requests) == 1


async def test_slash_commands_follow_the_channel_allowlist(
    discord_model_env: dict[str, str],
    fake_discord: FakeDiscord,
    serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__REGISTER_SLASH_COMMANDS", "true")
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__ALLOWED_CHANNELS", f'["{OTHER}"]')
    async with serving():
        refused = fake_discord.inject_slash_command(
            OWNER, "status", guild_id=GUILD, channel_id=TEXT
        )
        fake_discord.inject_slash_command(OWNER, "status", guild_id=GUILD, channel_id=OTHER)
        [allowed] = await replies(fake_discord, OTHER)
        await fake_discord.await_for(lambda: answered(fake_discord, refused))
    assert "Model: openai/test-model" in allowed.content
    assert not [m for m in sent_in(fake_discord, TEXT) if "Model:" in m.content]


# -- connection --------------------------------------------------------------------------------


async def test_turn_in_flight_survives_a_dropped_connection_and_resume(
    discord_model_env: dict[str, str],
    model: ScriptedModel,
    fake_discord: FakeDiscord,
    serving: Serving,
) -> None:
    dm = fake_discord.dm_channel_id(OWNER)
    async with serving():
        model.script(text("slow answer", delay_s=1.0))
        fake_discord.inject_dm(OWNER, "take your time")
        await fake_discord.await_for(lambda: model.requests)
        assert fake_discord.drop_connection()
        fake_discord.inject_dm(OWNER, "after the drop")
        sent = await replies(fake_discord, dm, count=2)
    contents = [m.content for m in sent]
    assert "slow answer" in contents  # the turn in flight is not lost
    assert any(c.endswith("after the drop") for c in contents)
    assert fake_discord.resume_count >= 1


async def test_bad_token_fails_the_channel_with_a_clear_log_line(
    discord_model_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: Any,
) -> None:
    from agent.config import load_settings
    from agent.daemon.serve import serve

    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__BOT_TOKEN", "WRONG.TOKEN")
    code = await asyncio.wait_for(serve(load_settings(), stop=asyncio.Event()), 20)
    assert code == 2
    assert any("discord did not start" in r.getMessage() for r in caplog.records)


async def test_bad_discord_token_leaves_telegram_running(
    discord_model_env: dict[str, str],
    telegram_model_env: dict[str, str],
    fake_telegram: FakeTelegram,
    daemon: Callable[[], Daemon],
    monkeypatch: pytest.MonkeyPatch,
    caplog: Any,
) -> None:
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__BOT_TOKEN", "WRONG.TOKEN")
    async with daemon() as running:
        fake_telegram.inject_message(42, 42, "still there?")
        [reply] = await fake_telegram.await_for(lambda m: m.method == "sendMessage", timeout=10)
    assert running.exit_code == 0
    assert reply.plain and reply.plain.endswith("still there?")
    assert any("discord did not start" in r.getMessage() for r in caplog.records)


async def test_a_discord_recording_is_transcribed_like_a_telegram_voice_note(
    discord_env: dict[str, str], fake_llm: FakeLLM, fake_discord: FakeDiscord, serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PINCLAW_CHANNELS__DISCORD__TRANSCRIPTION_MODEL", "openai/whisper-1")
    fake_llm.transcript = "switch the fan off"
    async with serving():
        fake_discord.inject_dm(OWNER, "", attachments=[("memo.ogg", b"OggS fake audio")])
        # its first transcription imports LiteLLM: seconds on a loaded machine
        await replies(fake_discord, fake_discord.dm_channel_id(OWNER), within_s=30.0)
    [(model, audio)] = fake_llm.transcriptions
    assert model == "whisper-1" and audio == b"OggS fake audio"
    assert "(recording transcript: switch the fan off)" in last_user_content(fake_llm.requests[0])


async def test_a_fact_told_on_telegram_follows_the_person_but_not_into_groups_or_other_dms(
    telegram_env: dict[str, str], discord_env: dict[str, str], fake_llm: FakeLLM,
    fake_telegram: FakeTelegram, fake_discord: FakeDiscord, serving: Serving,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from fakes.llm_server import tool_calls

    alice, bob, group = 42, 43, -100777
    monkeypatch.setenv("PINCLAW_PEOPLE__ALICE__TELEGRAM", str(alice))
    monkeypatch.setenv("PINCLAW_PEOPLE__ALICE__DISCORD", OWNER)
    monkeypatch.setenv("PINCLAW_PEOPLE__ALICE__OWNER", "true")
    monkeypatch.setenv("PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS", f'["{alice}", "{bob}"]')
    fake_llm.script(
        tool_calls(("memory_store", {"content": "Alice's boat is called Wavecrest."})),
        text("Noted."),
    )
    question = "what is my boat called?"
    async with serving():
        fake_telegram.inject_message(alice, alice, "my boat is called Wavecrest, remember it")
        await fake_telegram.await_for(lambda m: "Noted" in (m.plain or ""))
        fake_discord.inject_dm(OWNER, question)
        await replies(fake_discord, fake_discord.dm_channel_id(OWNER))
        fake_telegram.inject_message(group, alice, f"@pinclaw_test_bot {question}",
                                     chat_type="group")  # fmt: skip
        await fake_telegram.await_for(lambda m: m.chat_id == group)
        fake_telegram.inject_message(bob, bob, question)
        await fake_telegram.await_for(lambda m: m.chat_id == bob)
    asked = {where: last_user_content(r) for r in fake_llm.requests[2:]
             for where in ("discord", "telegram group", "telegram")
             if f"| {where} |" in last_user_content(r)}  # fmt: skip
    assert "Wavecrest" in asked["discord"]  # Alice on Discord: recalled before the turn
    assert "[Remembered" in asked["discord"]
    assert "Wavecrest" not in asked["telegram group"]  # a group never sees a private memory
    assert "Wavecrest" not in asked["telegram"]  # nor does Bob
    one_shot = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "agent", "run", "-m", question],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert one_shot.returncode == 0, one_shot.stderr
    assert "Wavecrest" in last_user_content(fake_llm.requests[-1])  # the terminal is the owner


async def test_an_attachment_download_stops_at_the_limit_whatever_its_announced_size() -> None:
    """The CDN's body is read only up to the limit (channels/discord/cdn.py), even when it
    announces no length: never whole into memory, whatever the message said its size was."""
    http = SimpleNamespace(proxy=None, proxy_auth=None)
    async with endless_file("/attachments/1/2/big.bin") as served:
        with pytest.raises(OSError) as refused:
            await fetch_from_cdn(http, served.url, 2**20)  # type: ignore[arg-type]
    assert refused.value.errno == errno.EFBIG
    assert served.sent < 32 * 2**20


def test_a_slash_commands_interaction_is_kept_only_while_discord_takes_its_followup() -> None:
    now = [0.0]
    waiting = PendingInteractions(max_kept=3, clock=lambda: now[0])
    for n in range(5):
        waiting.put(f"interaction-{n}", SimpleNamespace(id=n))  # type: ignore[arg-type]
    assert len(waiting) == 3 and waiting.pop("interaction-0") is None  # the oldest went first
    now[0] = KEPT_S
    assert waiting.pop("interaction-4") is None and len(waiting) == 0
