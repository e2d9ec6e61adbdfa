"""Discord adapter (discord.py): gateway events in, replies with attachments out.

Embedded with `login()` + `connect()` in the daemon's loop, never the blocking `run()`.
discord.py handles heartbeats, reconnects, resumes and REST rate limits itself. Its REST
root and gateway are class attributes, so `api_base` / `gateway_url` are applied at start
and restored at stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route

from channels.base import (
    LEFT_OUT_LINK,
    ApprovalAnswer,
    ApprovalQuestion,
    ChatRef,
    IncomingMessage,
    MayAnswer,
    OutgoingMedia,
    OutgoingPart,
    RemoteFile,
    Reply,
    ReplyStream,
    Submit,
    reply_parts,
)
from channels.capabilities import CHAT_COMMANDS, MediaKind
from channels.config import DiscordSettings
from channels.discord import reactions
from channels.discord.approvals import DiscordApprovals
from channels.discord.cdn import fetch_from_cdn
from channels.discord.interactions import PendingInteractions
from channels.discord.kind import DISCORD
from channels.discord.send_errors import send_failed
from channels.discord.stream import DiscordStream, reference_to
from channels.discord.voice_message import send_voice_message
from channels.text import split_message

log = logging.getLogger(__name__)

MAX_CHARS = 2000
DEFAULT_UPLOAD_LIMIT = 10 * 1024 * 1024
READY_TIMEOUT_S = 30.0
# Discord drops a message sent again with the same nonce (enforce_nonce, which discord.py
# sets with every nonce) "in the past few minutes"; within this much a resend is safe.
NONCE_WINDOW_S = 120.0
NOT_ALLOWED = "This bot answers only the users its owner allowed."

Messageable = Any  # a DM, text channel or thread: anything with send() and typing()


def media_kind(attachment: discord.Attachment) -> MediaKind:
    if attachment.is_voice_message():
        return "VOICE"
    kind = (attachment.content_type or "").split("/", 1)[0]
    return {"image": "IMAGE", "video": "VIDEO", "audio": "AUDIO"}.get(kind, "DOCUMENT")  # type: ignore[return-value]


class _Client(discord.Client):
    def __init__(self, owner: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self.owner = owner
        self.tree = app_commands.CommandTree(self)

    async def on_message(self, message: discord.Message) -> None:
        await self.owner.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.owner.approvals.on_interaction(interaction)


class DiscordChannel:
    name = "discord"
    capabilities = dataclasses.replace(DISCORD.capabilities, nonce_window_s=NONCE_WINDOW_S)
    delivery_instructions = DISCORD.delivery_instructions

    def __init__(self, settings: DiscordSettings) -> None:
        if settings.bot_token is None:
            raise ValueError("discord: no bot token; set PINCLAW_CHANNELS__DISCORD__BOT_TOKEN")
        self._settings = settings
        self._submit: Submit | None = None
        self._allowed: MayAnswer = lambda _id, _name: False  # until start() is given it
        self._accepting = False
        self.standby = False  # another process takes the messages (SharesIntake)
        # pinclaw never joins voice: no warnings about voice libraries it does not need.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = True
        intents.message_content = True
        self._client = _Client(self, intents=intents, guild_ready_timeout=0.5)
        self._connection: asyncio.Task[None] | None = None
        self._saved_urls: tuple[str, yarl.URL] | None = None
        self._interactions = PendingInteractions()  # by the message id a reply names
        self.approvals = DiscordApprovals()  # answers the buttons of ask_approval
        if settings.register_slash_commands:
            for name, text in CHAT_COMMANDS:
                self._client.tree.add_command(self._slash(name, text))

    # -- life -------------------------------------------------------------------------------

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        self._submit = submit
        self._allowed = allowed
        self._accepting = not self.standby  # from the first event (Discord sends none again)
        self._saved_urls = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
        Route.BASE = self._settings.api_base.rstrip("/")
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self._settings.gateway_url)
        try:
            assert self._settings.bot_token is not None
            await self._client.login(self._settings.bot_token.get_secret_value())
            self._connection = asyncio.create_task(self._client.connect(reconnect=True))
            ready = asyncio.create_task(self._client.wait_until_ready())
            done, _ = await asyncio.wait(
                {ready, self._connection},
                timeout=READY_TIMEOUT_S,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if ready not in done:
                ready.cancel()
                if self._connection.done():
                    self._connection.result()  # raises why the gateway refused us
                raise TimeoutError("the Discord gateway did not become ready")
            if self._settings.register_slash_commands:
                await self._client.tree.sync()
        except BaseException:
            await self.stop()
            raise
        user = self._client.user
        log.info("discord: connected as %s", user.name if user else "?")

    @property
    def account(self) -> str:
        """The bot's user name, as the gateway's ready event gave it ("" before)."""
        user = self._client.user
        return f"@{user.name}" if user is not None else ""

    async def start_intake(self) -> None:
        self._accepting = True

    async def stop_intake(self) -> None:
        self._accepting = False

    async def stop(self) -> None:
        self._accepting = False
        await self._client.close()
        if self._connection is not None:
            self._connection.cancel()
            with contextlib.suppress(BaseException):
                await self._connection
        if self._saved_urls is not None:
            Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = self._saved_urls
            self._saved_urls = None

    # -- in ---------------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        me = self._client.user
        if me is None or message.author.bot or message.author.id == me.id:
            return
        if not self._accepting or self._submit is None:
            log.warning("discord: not taking messages now; one from %s dropped", message.author)
            return
        if message.guild is not None and not self._guild_message_wanted(message, me.id):
            return
        # A forward leaves its own content and attachments empty: the forwarded message's
        # are in its snapshot (the turn is marked someone else's words: forwarded_from).
        snapshots = message.message_snapshots
        own = re.sub(rf"<@!?{me.id}>", "", message.content).strip()
        text = "\n\n".join(t for t in (own, *(s.content.strip() for s in snapshots)) if t)
        attachments = [*message.attachments, *(a for s in snapshots for a in s.attachments)]
        if not text and not attachments:
            log.info("discord: a message with nothing pinclaw reads (a sticker, an embed…)")
            return
        allowed = self._allowed(str(message.author.id), message.author.name)
        files = tuple(
            RemoteFile(media_kind(item), item.url, item.filename, item.size) for item in attachments
        )
        # Stored before this handler returns; a stranger's files are not even listed.
        await self._submit(
            IncomingMessage(
                chat=ChatRef("discord", str(message.channel.id)),
                sender_id=str(message.author.id),
                sender_name=message.author.display_name,
                sender_username=message.author.name,
                text=text,
                is_group=message.guild is not None,
                message_id=str(message.id),
                files=files if allowed else (),
                forwarded_from="someone" if snapshots else "",
            )
        )

    def _place_allowed(self, guild_id: int | None, channel: Any) -> bool:
        """allowed_guilds and allowed_channels (a thread counts as its parent channel);
        they do not apply to direct messages."""
        settings = self._settings
        if guild_id is None:
            return True
        if settings.allowed_guilds and str(guild_id) not in settings.allowed_guilds:
            return False
        ids = {str(getattr(channel, "id", "")), str(getattr(channel, "parent_id", "") or "")}
        return not settings.allowed_channels or bool(ids & set(settings.allowed_channels))

    def _guild_message_wanted(self, message: discord.Message, bot_id: int) -> bool:
        """Allowed server and channel, and addressed to the bot unless guild_mode is "all"."""
        assert message.guild is not None
        if not self._place_allowed(message.guild.id, message.channel):
            return False
        if self._settings.guild_mode == "all":
            return True
        if any(user.id == bot_id for user in message.mentions):
            return True
        replied = message.reference.resolved if message.reference else None
        return isinstance(replied, discord.Message) and replied.author.id == bot_id

    async def fetch_file(self, file: RemoteFile, max_bytes: int | None = None) -> bytes:
        """The file's bytes, at most `max_bytes` (OSError past them, whatever size the message
        announced): the runtime saves them itself, through the workspace's resolver."""
        return await fetch_from_cdn(self._client.http, file.ref, max_bytes)

    def _slash(self, name: str, description: str) -> app_commands.Command[Any, Any, Any]:
        async def command(interaction: discord.Interaction) -> None:
            if self._submit is None or interaction.channel_id is None:
                return
            user, in_guild = interaction.user, interaction.guild_id is not None
            allowed = self._allowed(str(user.id), user.name)
            if in_guild and not (
                allowed and self._place_allowed(interaction.guild_id, interaction.channel)
            ):
                # In servers the runtime answers strangers with silence, but an interaction
                # must be answered: privately, to the one who asked.
                await interaction.response.send_message(NOT_ALLOWED, ephemeral=True)
                return
            await interaction.response.defer(thinking=True)
            # The reply finds its interaction by this id (Reply.reply_to), not by chat.
            message_id = f"interaction-{interaction.id}"
            self._interactions.put(message_id, interaction)
            await self._submit(
                IncomingMessage(
                    chat=ChatRef("discord", str(interaction.channel_id)),
                    sender_id=str(user.id),
                    sender_name=user.display_name,
                    sender_username=user.name,
                    text=f"/{name}",
                    is_group=in_guild,
                    message_id=message_id,
                )
            )

        return app_commands.Command(name=name, description=description, callback=command)

    # -- out --------------------------------------------------------------------------------

    async def target(self, chat: ChatRef) -> Messageable:
        channel = self._client.get_channel(int(chat.chat_id))
        return channel or await self._client.fetch_channel(int(chat.chat_id))

    @contextlib.asynccontextmanager
    async def typing(self, chat: ChatRef) -> AsyncIterator[None]:
        """Discord's typing indicator, renewed by discord.py until the turn ends."""
        try:
            channel = await self.target(chat)
            indicator = channel.typing()
        except discord.HTTPException:
            yield
            return
        async with indicator:
            yield

    async def react(self, chat: ChatRef, message_id: str, emoji: str, previous: str = "") -> None:
        await reactions.react(self._client, chat, message_id, emoji, previous)

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        if not self._settings.stream_replies:
            return None
        return DiscordStream(self.target, chat, reply_to, max_chars=MAX_CHARS)

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, MAX_CHARS, split_message)

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> str | None:
        """One message: text (a reply to `reply_to`, or a slash command's answer) or one
        file; a file that cannot go is reported in the chat. One attempt: the outbox
        retries (discord.py itself already waits out rate limits). Every message carries
        the part's nonce, so Discord drops a resend of one that did arrive; a part without
        previews (a tainted turn's) has its embeds suppressed, so Discord fetches no link
        of it. The message's id is returned."""
        nonce, suppress = part.nonce or None, not part.previews
        try:
            channel = await self.target(chat)
            if part.media is not None:
                return _id(await self._send_media(channel, part.media, nonce, suppress))
            interaction = self._interactions.pop(part.reply_to)
            if interaction is not None:  # a webhook: no nonce; tried once, then as a message
                followup = interaction.followup
                sent = await followup.send(part.text, wait=True, suppress_embeds=suppress)
                return _id(sent)
            reference = reference_to(part.reply_to, channel)
            sent = await channel.send(
                part.text,
                reference=reference,
                mention_author=False,
                nonce=nonce,
                suppress_embeds=suppress,
            )
            return _id(sent)
        except (discord.DiscordException, aiohttp.ClientError, OSError) as exc:
            failed = send_failed(exc)  # channels/discord/send_errors.py: one row per error
            if failed is None:
                raise
            raise failed from exc

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """The question in the chat with Approve / Deny / Always allow buttons; see
        channels/discord/approvals.py."""
        return await self.approvals.ask(await self.target(chat), question, may_answer)

    async def _send_media(
        self, channel: Messageable, item: OutgoingMedia, nonce: str | None, suppress: bool
    ) -> Any:  # the discord.Message sent
        """The file, or a line saying why not; a URL is sent as a link Discord previews,
        never from a part without previews (`suppress`: its link is left out)."""
        if item.is_url and suppress:
            return await channel.send(LEFT_OUT_LINK, nonce=nonce, suppress_embeds=True)
        if item.is_url:  # Discord shows a preview of the link
            return await channel.send(item.source, nonce=nonce)
        limit = getattr(getattr(channel, "guild", None), "filesize_limit", DEFAULT_UPLOAD_LIMIT)
        if item.data is None:
            return await channel.send(
                f"(Could not send {item.name}: it was not read.)",
                nonce=nonce,
                suppress_embeds=suppress,
            )
        if len(item.data) > limit:
            return await channel.send(
                f"(Could not send {item.name}: {len(item.data) / 1e6:.1f} MB is over "
                f"Discord's upload limit of {limit / 1e6:.0f} MB.)",
                nonce=nonce,
                suppress_embeds=suppress,
            )
        try:
            if item.kind == "VOICE" and item.data.startswith(b"OggS"):  # a voice message
                return await send_voice_message(channel, item.data, nonce)
            upload = discord.File(io.BytesIO(item.data), filename=item.name)
            return await channel.send(file=upload, nonce=nonce, suppress_embeds=suppress)
        except discord.HTTPException as exc:
            if exc.status >= 500 or exc.status in (403, 404, 429):
                raise
            why = exc.text or exc.status
            return await channel.send(
                f"(Could not send {item.name}: {why}.)", nonce=nonce, suppress_embeds=suppress
            )


def _id(message: Any) -> str | None:
    return str(message.id) if message is not None else None
