"""The Discord double speaks real discord.py: login, gateway, REST sends, errors, RESUME."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Iterator

import discord
import pytest
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route
from fakes.discord_server import FakeDiscord, point_discord_at

GUILD, TEXT, THREAD = "500", "600", "601"


class Bot(discord.Client):
    """Records what it receives; answers "ping" with a reply "pong", like a tiny adapter."""

    def __init__(self) -> None:
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = True
        intents.message_content = True
        # on_ready waits guild_ready_timeout after the last GUILD_CREATE (default 2 s)
        super().__init__(intents=intents, guild_ready_timeout=0.1)
        self.ready = asyncio.Event()
        self.received: list[discord.Message] = []

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        if message.author == self.user:  # Discord echoes the bot's own messages
            return
        self.received.append(message)
        if message.content == "ping":
            await message.reply("pong")


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    with FakeDiscord() as server:
        thread = {"id": THREAD, "name": "a-thread", "type": "thread", "parent_id": TEXT}
        server.add_guild(GUILD, "test-guild", channels=[TEXT, thread])
        with point_discord_at(server):
            yield server


@contextlib.asynccontextmanager
async def running(fake: FakeDiscord, token: str = "TEST.TOKEN") -> AsyncIterator[Bot]:
    bot = Bot()
    await bot.login(token)
    task = asyncio.create_task(bot.connect())
    try:
        await asyncio.wait_for(bot.ready.wait(), 5)
        yield bot
    finally:
        await bot.close()
        await asyncio.wait_for(task, 5)


async def test_point_discord_at_restores_globals() -> None:
    base, gateway = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    with FakeDiscord() as server, point_discord_at(server):
        assert server.api_base == Route.BASE
        assert yarl.URL(server.gateway_url) == DiscordWebSocket.DEFAULT_GATEWAY
    assert (base, gateway) == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)


async def test_ready_carries_user_and_guild_cache(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        assert bot.user is not None
        assert (bot.user.id, bot.user.name, bot.user.bot) == (1000, "pinclaw-bot", True)
        guild = bot.get_guild(int(GUILD))
        assert guild is not None and guild.name == "test-guild"
        assert isinstance(guild.get_channel(int(TEXT)), discord.TextChannel)
        assert isinstance(guild.get_thread(int(THREAD)), discord.Thread)
        assert guild.me is not None
        fetched = await bot.fetch_channel(int(TEXT))
        assert isinstance(fetched, discord.TextChannel)
    query = fake.gateway_connections[0]
    assert (query["v"], query["encoding"]) == ("10", "json")
    assert fake.last_identify is not None and fake.last_identify["intents"] == bot.intents.value


async def test_dm_reply_is_recorded(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        asked = fake.inject_dm("42", "ping", username="alice")
        sent = await fake.await_for(lambda: fake.messages)
        assert sent[0].content == "pong"
        assert sent[0].reply_to == asked
        assert sent[0].channel_id == fake.dm_channel_id("42")
        (message,) = bot.received
        assert isinstance(message.channel, discord.DMChannel)
        assert (message.author.id, message.author.name) == (42, "alice")


async def test_guild_mention_reply_and_attachment(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        plain = await bot.get_channel(int(TEXT)).send("hello")  # type: ignore[union-attr]
        fake.inject_guild_message(
            GUILD,
            TEXT,
            "42",
            "look",
            mention_bot=True,
            reply_to_message_id=plain.id,
            attachments=[("a.txt", b"attached bytes")],
        )
        await fake.await_for(lambda: bot.received)
        message = bot.received[0]
        assert bot.user in message.mentions
        assert message.content == "<@1000> look"
        assert message.guild is not None and message.guild.id == int(GUILD)
        assert message.reference is not None and message.reference.message_id == plain.id
        assert isinstance(message.reference.resolved, discord.Message)
        assert await message.attachments[0].read() == b"attached bytes"


async def test_thread_message_and_unknown_thread(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        fake.inject_guild_message(GUILD, THREAD, "42", "in thread", thread=True)
        fake.inject_guild_message(GUILD, "777", "42", "new thread", thread=True)
        await fake.await_for(lambda: len(bot.received) == 2)
        assert all(isinstance(m.channel, discord.Thread) for m in bot.received)
        assert [m.channel.id for m in bot.received] == [int(THREAD), 777]


async def test_file_upload_edit_and_typing(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        channel = bot.get_channel(int(TEXT))
        assert isinstance(channel, discord.TextChannel)
        async with channel.typing():
            sent = await channel.send("see", file=discord.File(io.BytesIO(b"\x89PNG..."), "a.png"))
        assert sent.attachments[0].filename == "a.png"
        await sent.edit(content="seen")
    (record,) = fake.messages
    assert record.attachments == (("a.png", b"\x89PNG..."),)
    assert (record.content, record.edits) == ("seen", 1)
    assert fake.typing == [TEXT]


async def test_too_long_content_is_rejected(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        channel = bot.get_channel(int(TEXT))
        assert isinstance(channel, discord.TextChannel)
        with pytest.raises(discord.HTTPException) as info:
            await channel.send("x" * 2001)
        assert (info.value.status, info.value.code) == (400, 50035)
        await channel.send("x" * 2000)
    assert [len(m.content) for m in fake.messages] == [2000]


async def test_upload_over_limit_is_rejected(fake: FakeDiscord) -> None:
    fake.upload_limit = 1024
    async with running(fake) as bot:
        channel = bot.get_channel(int(TEXT))
        assert isinstance(channel, discord.TextChannel)
        with pytest.raises(discord.HTTPException) as info:
            await channel.send(file=discord.File(io.BytesIO(b"x" * 1025), "big.bin"))
        assert (info.value.status, info.value.code) == (413, 40005)
    assert fake.messages == []


async def test_bad_token_fails_login(fake: FakeDiscord) -> None:
    bot = Bot()
    with pytest.raises(discord.LoginFailure):
        await bot.login("WRONG.TOKEN")
    await bot.close()
    assert fake.calls[-1].path == "/users/@me" and fake.calls[-1].status == 401


async def test_commands_sync(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        tree = app_commands.CommandTree(bot)

        @tree.command(name="ask", description="Ask the agent")
        async def ask(interaction: discord.Interaction, question: str) -> None: ...

        synced = await tree.sync()
        assert [c.name for c in synced] == ["ask"]
        await tree.sync(guild=discord.Object(int(GUILD)))
    assert [c["name"] for c in fake.commands["global"]] == ["ask"]
    assert fake.commands[GUILD] == []


async def test_dropped_connection_resumes_and_delivers(fake: FakeDiscord) -> None:
    async with running(fake) as bot:
        assert fake.drop_connection()
        fake.inject_dm("42", "after the drop")
        await fake.await_for(lambda: [m for m in bot.received if m.content == "after the drop"])
        assert (fake.identify_count, fake.resume_count) == (1, 1)


async def test_timeout_message_is_useful(fake: FakeDiscord) -> None:
    with pytest.raises(TimeoutError, match=r"still false after 0\.05s"):
        await fake.await_for(lambda: fake.messages, timeout=0.05)
