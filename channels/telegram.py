"""Telegram adapter (python-telegram-bot): long polling in, HTML replies and uploads out.

Embedded in the daemon's event loop with initialize()/start()/start_polling(), never the
blocking run_polling(). The pure parts — who is addressed, what an update means — are
plain functions in channels/telegram_incoming.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from telegram import BotCommand, InlineKeyboardMarkup, Message, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from channels.base import (
    ApprovalAnswer,
    ApprovalQuestion,
    Attachment,
    ChatRef,
    MayAnswer,
    OutgoingMedia,
    Reply,
    ReplyStream,
    Submit,
    sender_allowed,
)
from channels.capabilities import CHAT_COMMANDS, TELEGRAM, TELEGRAM_DELIVERY
from channels.config import TelegramSettings
from channels.stream import PacedStream
from channels.telegram_approvals import CALLBACK_PATTERN, TelegramApprovals
from channels.telegram_incoming import addressed_to_bot, attachments_of, to_incoming
from channels.text import markdown_to_telegram_html, split_message

log = logging.getLogger(__name__)

T = TypeVar("T")
Transcriber = Callable[[Path], Awaitable[str]]
MAX_CHARS = 4096
TYPING_EVERY_S = 4.0  # Telegram shows "typing" for about 5 s
STREAM_EDIT_EVERY_S = 1.0
MAX_RETRIES = 5


async def with_retries(call: Callable[[], Awaitable[T]]) -> T:
    """Honour Telegram's 429 retry_after; retry network errors with backoff; raise the rest."""
    for attempt in range(MAX_RETRIES):
        try:
            return await call()
        except RetryAfter as exc:
            wait = exc.retry_after
            seconds = wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)
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
    capabilities = TELEGRAM
    delivery_instructions: str | None = TELEGRAM_DELIVERY

    def __init__(
        self, settings: TelegramSettings, *, workspace: Path, transcribe: Transcriber | None = None
    ) -> None:
        if settings.bot_token is None:
            raise ValueError("telegram: no bot token; set PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN")
        self._settings = settings
        self._workspace = workspace
        self._transcribe = transcribe
        self._submit: Submit | None = None
        self._app: Application[Any, Any, Any, Any, Any, Any] = (
            ApplicationBuilder()
            .token(settings.bot_token.get_secret_value())
            .base_url(settings.api_base)
            .base_file_url(settings.file_api_base)
            .build()
        )
        self._app.add_handler(MessageHandler(filters.ALL, self._on_update))
        self._approvals = TelegramApprovals()
        self._app.add_handler(CallbackQueryHandler(self._approvals.on_press, CALLBACK_PATTERN))

    @property
    def bot(self) -> Any:
        return self._app.bot

    async def start(self, submit: Submit) -> None:
        self._submit = submit
        await self._app.initialize()  # getMe: a bad token fails here
        await self._app.start()
        await with_retries(
            lambda: self.bot.set_my_commands(
                [BotCommand(name, text) for name, text in CHAT_COMMANDS]
            )
        )
        updater = self._app.updater
        assert updater is not None
        await updater.start_polling(
            poll_interval=0.0,
            timeout=10,
            allowed_updates=[Update.MESSAGE, Update.CALLBACK_QUERY],
            error_callback=self._polling_error,
        )
        log.info("telegram: polling as @%s", self.bot.username)

    def _polling_error(self, exc: Exception) -> None:
        log.warning("telegram: polling error (%s); retrying", exc)

    async def stop_intake(self) -> None:
        """Stop polling; updates already fetched are still handed to the runtime."""
        updater = self._app.updater
        if updater is not None and updater.running:
            await updater.stop()
        if self._app.running:
            await self._app.stop()

    async def stop(self) -> None:
        await self.stop_intake()
        await self._app.shutdown()  # a no-op when start() never got that far

    # -- in ------------------------------------------------------------------------------

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        user = message.from_user if message else None
        if message is None or user is None or self._submit is None or user.id == self.bot.id:
            return
        if not addressed_to_bot(message, self.bot.id, self.bot.username, self._settings.group_mode):
            return
        # A stranger's files are not downloaded: the runtime will refuse the message anyway.
        allowed = sender_allowed(self._settings.allowed_users, str(user.id), user.username or "")
        attachments = await self._attachments(message) if allowed else ()
        self._submit(to_incoming(message, self.bot.username, attachments))

    async def _attachments(self, message: Message) -> tuple[Attachment, ...]:
        try:
            return await attachments_of(message, self._workspace, self._transcribe)
        except Exception:
            log.exception("telegram: could not save the attachment of %s", message.message_id)
            return ()

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
            with contextlib.suppress(NetworkError):
                await self.bot.send_chat_action(
                    chat.chat_id, ChatAction.TYPING, message_thread_id=_thread(chat)
                )
            await asyncio.sleep(TYPING_EVERY_S)

    def open_stream(self, chat: ChatRef, reply_to: str) -> ReplyStream | None:
        if not self._settings.stream_replies:
            return None
        return TelegramStream(self, chat, reply_to)

    async def send(self, chat: ChatRef, reply: Reply) -> None:
        await self.send_parts(chat, split_message(reply.text, MAX_CHARS), reply.reply_to)
        for media in reply.media:
            await self.send_media(chat, media)

    async def send_parts(
        self, chat: ChatRef, parts: list[str], reply_to: str, first: Message | None = None
    ) -> None:
        """Send each part as HTML (plain text when Telegram rejects the markup); with
        `first`, the first part replaces that message's text instead."""
        for index, part in enumerate(parts):
            target = first if index == 0 else None
            await self._send_text(chat, part, reply_to if index == 0 else "", target)

    async def _send_text(
        self, chat: ChatRef, text: str, reply_to: str, edit: Message | None
    ) -> None:
        async def attempt(body: str, mode: str | None) -> Any:
            if edit is not None:
                return await edit.edit_text(body, parse_mode=mode)
            return await self.bot.send_message(
                chat.chat_id,
                body,
                parse_mode=mode,
                message_thread_id=_thread(chat),
                reply_parameters=_reply(reply_to),
            )

        try:
            await with_retries(lambda: attempt(markdown_to_telegram_html(text), ParseMode.HTML))
        except BadRequest as exc:
            if "not modified" in str(exc).lower():
                return
            log.info("telegram: HTML refused (%s); sending plain text", exc)
            await with_retries(lambda: attempt(text, None))

    async def ask_approval(
        self, chat: ChatRef, question: ApprovalQuestion, may_answer: MayAnswer
    ) -> ApprovalAnswer:
        """The question in the chat (and thread) with Approve / Deny / Always allow buttons;
        see channels/telegram_approvals.py."""

        async def send(text: str, buttons: InlineKeyboardMarkup) -> Message:
            message: Message = await with_retries(
                lambda: self.bot.send_message(
                    chat.chat_id, text, message_thread_id=_thread(chat), reply_markup=buttons
                )
            )
            return message

        return await self._approvals.ask(send, question, may_answer)

    async def send_media(self, chat: ChatRef, media: OutgoingMedia) -> None:
        senders = {
            "IMAGE": self.bot.send_photo,
            "DOCUMENT": self.bot.send_document,
            "VIDEO": self.bot.send_video,
            "AUDIO": self.bot.send_audio,
            "VOICE": self.bot.send_voice,
        }
        send = senders[media.kind]
        try:
            if media.is_url:
                await with_retries(
                    lambda: send(chat.chat_id, media.source, message_thread_id=_thread(chat))
                )
            else:
                data = await asyncio.to_thread(Path(media.source).read_bytes)
                name = Path(media.source).name
                await with_retries(
                    lambda: send(chat.chat_id, data, filename=name, message_thread_id=_thread(chat))
                )
        except (BadRequest, OSError) as exc:
            log.warning("telegram: could not send %s: %s", media.source, exc)
            await self._send_text(
                chat, f"(Could not send {Path(media.source).name}: {exc})", "", None
            )


class TelegramStream(PacedStream):
    """The reply shown while it is written: one message, edited at most once a second."""

    def __init__(self, channel: TelegramChannel, chat: ChatRef, reply_to: str) -> None:
        super().__init__(interval_s=STREAM_EDIT_EVERY_S, max_chars=MAX_CHARS)
        self._channel = channel
        self._chat = chat
        self._reply_to = reply_to
        self._message: Message | None = None

    async def show(self, text: str) -> None:
        if self._message is None:
            self._message = await self._channel.bot.send_message(
                self._chat.chat_id,
                text,
                message_thread_id=_thread(self._chat),
                reply_parameters=_reply(self._reply_to),
            )
        elif text != self._message.text:
            edited = await self._message.edit_text(text)
            self._message = edited if isinstance(edited, Message) else self._message

    async def complete(self, reply: Reply) -> None:
        parts = split_message(reply.text, MAX_CHARS)
        await self._channel.send_parts(self._chat, parts, self._reply_to, first=self._message)
        for media in reply.media:
            await self._channel.send_media(self._chat, media)


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id else None


def _reply(message_id: str) -> ReplyParameters | None:
    if not message_id:
        return None
    return ReplyParameters(message_id=int(message_id), allow_sending_without_reply=True)
