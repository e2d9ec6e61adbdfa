"""Telegram adapter (python-telegram-bot's Bot): long polling in, HTML replies and uploads
out, one part at a time (the outbox decides when to try again).

The polling loop is ours (channels/telegram/polling.py) so an update is acknowledged only
after the runtime stored it. The pure parts — who is addressed, what an update means — are
plain functions in channels/telegram/incoming.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from telegram import Bot, BotCommand, InlineKeyboardMarkup, Message, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError
from telegram.request import HTTPXRequest

from channels.base import (
    LEFT_OUT_LINK,
    ApprovalAnswer,
    ApprovalQuestion,
    ChatRef,
    MayAnswer,
    OutgoingMedia,
    OutgoingPart,
    RemoteFile,
    Reply,
    ReplyStream,
    SendFailed,
    Submit,
    reply_parts,
)
from channels.capabilities import CHAT_COMMANDS
from channels.config import TelegramSettings
from channels.stream import PacedStream
from channels.telegram.approvals import NO_PREVIEWS, TelegramApprovals
from channels.telegram.download import download
from channels.telegram.incoming import addressed_to_bot, remote_files, to_incoming
from channels.telegram.kind import TELEGRAM
from channels.telegram.polling import UpdatePoller, retry_seconds
from channels.telegram.send_errors import as_send_failed
from channels.telegram.webhook import WebhookIntake
from channels.text import markdown_to_telegram_html, split_message

log = logging.getLogger(__name__)

TELEGRAM_REACTION = {"✅": "👌", "❌": "👎"}  # emoji Telegram does not offer as reactions

T = TypeVar("T")
UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY]  # what Telegram is asked to send
MAX_CHARS = 4096
TYPING_EVERY_S = 4.0  # Telegram shows "typing" for about 5 s
STREAM_EDIT_EVERY_S = 1.0
MAX_RETRIES = 5
# Telegram answers a send in well under a second, but a few seconds happen and 8 s has been
# seen; python-telegram-bot's default read timeout (5 s) turned such a send into a failure,
# and the part was sent again. A read timeout now means "maybe delivered"
# (channels/telegram/send_errors.py, where every failed send is read).
SEND_READ_TIMEOUT_S = 30.0


async def with_retries(call: Callable[[], Awaitable[T]]) -> T:
    """For calls made while someone waits (an approval question, the command menu):
    honour Telegram's 429 retry_after; retry network errors with backoff; raise the rest."""
    for attempt in range(MAX_RETRIES):
        try:
            return await call()
        except RetryAfter as exc:
            seconds = retry_seconds(exc.retry_after)
            log.warning("telegram: rate limited; waiting %.0f s", seconds)
            await asyncio.sleep(seconds)
        except BadRequest:
            raise
        except NetworkError as exc:
            if attempt == MAX_RETRIES - 1:
                raise
            log.warning("telegram: network error (%s); retrying", exc)
            await asyncio.sleep(0.5 * 2**attempt)
    return await call()


class TelegramChannel:
    name = "telegram"
    capabilities = TELEGRAM.capabilities
    delivery_instructions = TELEGRAM.delivery_instructions

    def __init__(self, settings: TelegramSettings) -> None:
        if settings.bot_token is None:
            raise ValueError("telegram: no bot token; set PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN")
        self._settings = settings
        self._submit: Submit | None = None
        self._allowed: MayAnswer = lambda _id, _name: False  # until start() is given it
        self.bot = Bot(
            settings.bot_token.get_secret_value(),
            base_url=settings.api_base,
            base_file_url=settings.file_api_base,
            request=HTTPXRequest(connection_pool_size=64, read_timeout=SEND_READ_TIMEOUT_S),
            get_updates_request=HTTPXRequest(read_timeout=30.0),
        )
        self._approvals = TelegramApprovals()
        self._poller = UpdatePoller(self.bot, self._on_update, allowed_updates=UPDATES)
        self._webhook = WebhookIntake(self.bot, self._on_update)  # mode = "webhook"
        self._polling: asyncio.Task[None] | None = None
        self._initialized = False
        self.standby = False  # another process polls: start for sending only (SharesIntake)

    async def start(self, submit: Submit, allowed: MayAnswer) -> None:
        self._submit = submit
        self._allowed = allowed
        await self.bot.initialize()  # getMe: a bad token fails here
        self._initialized = True
        await with_retries(
            lambda: self.bot.set_my_commands(
                [BotCommand(name, text) for name, text in CHAT_COMMANDS]
            )
        )
        if not self.standby:
            await self.start_intake()

    async def start_intake(self) -> None:
        """Poll (or set the webhook), unless this process does already."""
        if self._polling is not None or self._webhook.open:
            return
        if self._settings.mode == "webhook":
            url = self._settings.webhook_url
            await with_retries(lambda: self._webhook.start(url, UPDATES))
            log.info("telegram: updates by webhook at %s as @%s", url, self.bot.username)
            return
        self._polling = asyncio.create_task(self._poller.run(), name="telegram polling")
        log.info("telegram: polling as @%s", self.bot.username)

    @property
    def takes_webhooks(self) -> bool:
        return self._webhook.open

    async def receive_webhook(self, headers: Mapping[str, str], body: bytes) -> int:
        """An update Telegram posted (channels/telegram/webhook.py)."""
        return await self._webhook.receive(headers, body)

    @property
    def account(self) -> str:
        """The bot's @username, as getMe said it at start ("" before)."""
        return self.bot.name if self._initialized else ""

    async def stop_intake(self) -> None:
        """Stop polling (or the webhook): what was not stored yet is not acknowledged, so
        Telegram keeps it."""
        try:
            await self._webhook.stop()
        except TelegramError as exc:
            log.warning("telegram: deleteWebhook failed (%s); it stays set at Telegram", exc)
        if self._polling is not None:
            self._polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._polling
            self._polling = None

    async def stop(self) -> None:
        await self.stop_intake()
        if self._initialized:
            await self.bot.shutdown()
            self._initialized = False

    # -- in ------------------------------------------------------------------------------

    async def _on_update(self, update: Update) -> None:
        """Store a message meant for us (raises if it could not be: it comes again)."""
        if update.callback_query is not None:
            await self._approvals.on_press(update)
            return
        message = update.message
        user = message.from_user if message else None
        if message is None or user is None or self._submit is None or user.id == self.bot.id:
            return
        if not addressed_to_bot(message, self.bot.id, self.bot.username, self._settings.group_mode):
            return
        files = remote_files(message)
        if not (message.text or message.caption or files):
            log.info("telegram: a message with nothing pinclaw reads (a sticker, a poll…)")
            return
        # A stranger's files are not even listed: the runtime will refuse the message anyway.
        allowed = self._allowed(str(user.id), user.username or "")
        await self._submit(to_incoming(message, self.bot.username, files if allowed else ()))

    async def fetch_file(self, file: RemoteFile, max_bytes: int | None = None) -> bytes:
        """The file's bytes, at most `max_bytes` (OSError past them, however much Telegram
        announced): the runtime saves them itself, through the workspace's resolver."""
        return await download(self.bot, file.ref, max_bytes)

    # -- out -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def typing(self, chat: ChatRef) -> AsyncIterator[None]:
        """Telegram's "typing…", renewed until the turn ends."""
        task = asyncio.create_task(self._keep_typing(chat))
        try:
            yield
        finally:
            task.cancel()

    async def _keep_typing(self, chat: ChatRef) -> None:
        while True:
            with contextlib.suppress(TelegramError):  # also a 403: the reply will say so
                await self.bot.send_chat_action(
                    chat.chat_id, ChatAction.TYPING, message_thread_id=_thread(chat)
                )
            await asyncio.sleep(TYPING_EVERY_S)

    async def react(self, chat: ChatRef, message_id: str, emoji: str, previous: str = "") -> None:
        """setMessageReaction: a bot's one reaction replaces the last, from Telegram's own set
        (no ✅ or ❌ there: they show as 👌 and 👎)."""
        shown = TELEGRAM_REACTION.get(emoji, emoji).replace("\ufe0f", "")
        await self.bot.set_message_reaction(chat.chat_id, int(message_id), shown)

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        if not self._settings.stream_replies:
            return None
        return TelegramStream(self, chat, reply_to)

    def parts(self, reply: Reply) -> list[OutgoingPart]:
        return reply_parts(reply, MAX_CHARS, split_message)

    async def send_part(self, chat: ChatRef, part: OutgoingPart) -> str | None:
        """One attempt; the message id Telegram gave it (kept with the part in the outbox)."""
        if part.media is not None:
            return await self._send_media(chat, part.media, part.previews, part.text)
        return await self.send_text(chat, part.text, part.reply_to, previews=part.previews)

    async def send_text(
        self,
        chat: ChatRef,
        text: str,
        reply_to: str,
        edit: Message | None = None,
        *,
        previews: bool = True,
    ) -> str | None:
        """As HTML, or as plain text when Telegram rejects the markup; with `edit`, replace
        that message's text instead. One attempt: the outbox retries. Without `previews`
        Telegram is told not to fetch a link to preview it, on the edit too (an edit
        without the option previews again)."""
        options = None if previews else NO_PREVIEWS

        async def attempt(body: str, mode: str | None) -> Any:
            if edit is not None:
                return await edit.edit_text(body, parse_mode=mode, link_preview_options=options)
            return await self.bot.send_message(
                chat.chat_id,
                body,
                parse_mode=mode,
                message_thread_id=_thread(chat),
                reply_parameters=_reply(reply_to),
                link_preview_options=options,
            )

        try:
            html = markdown_to_telegram_html(text)
            return _id(await as_send_failed(lambda: attempt(html, ParseMode.HTML)))
        except SendFailed as exc:
            if not exc.permanent or not isinstance(exc.__cause__, BadRequest):
                raise  # a 403 (blocked) is not about the markup
            if "chat not found" in str(exc).lower():
                raise
            log.info("telegram: HTML refused (%s); sending plain text", exc)
            return _id(await as_send_failed(lambda: attempt(text, None)))

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """The question in the chat (and thread) with Approve / Deny / Always allow buttons;
        see channels/telegram/approvals.py. Never with a link preview: the question quotes
        what the model wants to do, and a preview would fetch its URL before anyone answers."""

        async def send(text: str, buttons: InlineKeyboardMarkup) -> Message:
            message: Message = await with_retries(
                lambda: self.bot.send_message(
                    chat.chat_id,
                    text,
                    message_thread_id=_thread(chat),
                    reply_markup=buttons,
                    link_preview_options=NO_PREVIEWS,
                )
            )
            return message

        return await self._approvals.ask(send, question, may_answer)

    async def _send_media(
        self, chat: ChatRef, media: OutgoingMedia, previews: bool = True, caption: str = ""
    ) -> str | None:
        """The file (with `caption` as HTML: a voice reply's text), or, when Telegram refuses
        it or it is gone, a line saying so. A URL is fetched by Telegram itself: never one
        from a reply without previews (a tainted turn's; agent/runtime/media.py leaves those
        out already)."""
        senders: dict[str, Callable[..., Awaitable[Any]]] = {
            "IMAGE": self.bot.send_photo,
            "DOCUMENT": self.bot.send_document,
            "VIDEO": self.bot.send_video,
            "AUDIO": self.bot.send_audio,
            "VOICE": self.bot.send_voice,
        }
        send = senders[media.kind]
        thread = _thread(chat)
        if media.is_url and not previews:
            return await self.send_text(chat, LEFT_OUT_LINK, "", previews=False)
        try:
            if media.is_url:
                return _id(
                    await as_send_failed(
                        lambda: send(chat.chat_id, media.source, message_thread_id=thread)
                    )
                )
            data, name = media.data, media.name
            if data is None:
                raise OSError("it was not read")
            shown = {"caption": markdown_to_telegram_html(caption), "parse_mode": ParseMode.HTML}
            return _id(
                await as_send_failed(
                    lambda: send(
                        chat.chat_id,
                        data,
                        filename=name,
                        message_thread_id=thread,
                        **(shown if caption else {}),
                    )
                )
            )
        except (SendFailed, OSError) as exc:
            if isinstance(exc, SendFailed) and not exc.permanent:
                raise
            log.warning("telegram: could not send %s: %s", media.source, exc)
            note = f"(Could not send {Path(media.source).name}: {exc})"
            said = f"{caption}\n\n{note}" if caption else note  # a caption is not lost
            return await self.send_text(chat, said, "", previews=previews)


class TelegramStream(PacedStream[Message]):
    """The reply shown while it is written: one message, edited at most once a second. The
    draft never previews a link: it is shown before anyone knows whether the turn will read
    untrusted content."""

    def __init__(self, channel: TelegramChannel, chat: ChatRef, reply_to: str) -> None:
        super().__init__(chat, reply_to, interval_s=STREAM_EDIT_EVERY_S, max_chars=MAX_CHARS)
        self._channel = channel

    async def send(self, text: str) -> Message:
        return await self._channel.bot.send_message(
            self._chat.chat_id,
            text,
            message_thread_id=_thread(self._chat),
            reply_parameters=_reply(self._reply_to),
            link_preview_options=NO_PREVIEWS,
        )

    async def edit(self, message: Message, text: str) -> Message:
        edited = await message.edit_text(text, link_preview_options=NO_PREVIEWS)
        return edited if isinstance(edited, Message) else message

    async def delete(self, message: Message) -> None:
        await message.delete()

    async def replace(self, message: Message, first: OutgoingPart) -> None:
        await self._channel.send_text(
            self._chat, first.text, "", edit=message, previews=first.previews
        )


def _id(sent: Any) -> str | None:
    """The message id of what a send returned (an edit may return True instead)."""
    return str(sent.message_id) if isinstance(sent, Message) else None


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id else None


def _reply(message_id: str) -> ReplyParameters | None:
    if not message_id:
        return None
    return ReplyParameters(message_id=int(message_id), allow_sending_without_reply=True)
