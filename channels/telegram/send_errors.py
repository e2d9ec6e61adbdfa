"""What a failed Telegram send means for the outbox: one row per error the Bot API (and
python-telegram-bot, which raises it) documents, each read as "sent", "retry" (not sent:
try again), "refused" (not sent, and trying again cannot help), "token" (not sent: the
bot's token was refused; it waits for the channel's next token) or "unknown" (the request
was written and no answer came: it may have arrived, and Telegram cannot be asked).

The courier (agent/runtime/queues/courier.py) acts on these through `SendFailed`; `unknown` is
where the at-most-once rule applies, so only a part Telegram may really have taken is
called so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import httpx
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from channels.base import SendFailed
from channels.telegram.polling import retry_seconds

Meaning = Literal["sent", "retry", "refused", "token", "unknown"]

# Failures where the request never reached Telegram whole: safe to send again.
NOT_SENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteError,
    httpx.WriteTimeout,
)


def meaning(exc: TelegramError) -> Meaning:
    """The table: the first row that takes `exc` (subclasses before their bases)."""
    if isinstance(exc, InvalidToken):
        # 401 Unauthorized (a token revoked or replaced in @BotFather) or 404 (a malformed
        # one): Telegram refuses the bot before it reads the request. Nothing went out, and
        # this token never will send it: the part waits for the channel's next token.
        return "token"
    if isinstance(exc, RetryAfter):
        # 429 Too Many Requests with parameters.retry_after: flood control did not take
        # the request; Telegram says when to try again.
        return "retry"
    if isinstance(exc, ChatMigrated):
        # 400 with parameters.migrate_to_chat_id: the group became a supergroup under a new
        # id. Not sent, and this chat takes nothing any more.
        return "refused"
    if isinstance(exc, Forbidden):
        # 403: the user blocked the bot, the bot was removed from the group, or it may not
        # write first. Not sent; the same request can only be refused again.
        return "refused"
    if isinstance(exc, BadRequest):  # a NetworkError's subclass: before that row
        if "not modified" in str(exc).lower():
            # 400 "message is not modified": an edit whose text the message already
            # shows. What was to be seen is there.
            return "sent"
        # 400 chat not found, message too long, entities that do not parse...: Telegram
        # checked the request and did not send it. (send_text first tries a markup
        # refusal again as plain text.)
        return "refused"
    if isinstance(exc, Conflict):
        # 409: another getUpdates or webhook holds the bot (a polling error, not a send's);
        # Telegram did not handle the request.
        return "retry"
    if isinstance(exc, NetworkError):  # python-telegram-bot's transport errors and 5xx
        cause = exc.__cause__
        if isinstance(cause, NOT_SENT):
            # No connection, or the request not written whole (connect, pool or write
            # timeout; a write error): Telegram never had it.
            return "retry"
        if isinstance(cause, httpx.TransportError):
            # A read timeout, a connection dropped or closed mid-answer: the request was
            # written and no answer came. It may have been delivered.
            return "unknown"
        if cause is None or isinstance(cause, TelegramError):
            # An HTTP answer of 5xx (500, 502 Bad Gateway, 503, 504; its body perhaps not
            # JSON): Telegram (or its front) answered that it did not handle the request.
            return "retry"
        # python-telegram-bot's "Unknown error in HTTP implementation": whether it was
        # written is not known.
        return "unknown"
    # Any other TelegramError (none is documented for a send): nothing says it did not go.
    return "unknown"


async def as_send_failed(call: Callable[[], Awaitable[Any]]) -> Any:
    """One attempt; what went wrong said in the outbox's terms (see `meaning`). A "sent"
    error returns None: there is nothing to send again, and no new message id."""
    try:
        return await call()
    except TelegramError as exc:
        what = meaning(exc)
        if what == "sent":
            return None
        wait = retry_seconds(exc.retry_after) if isinstance(exc, RetryAfter) else None
        raise SendFailed(
            str(exc) or type(exc).__name__,
            retry_after=wait,
            permanent=what == "refused",
            maybe_sent=what == "unknown",
            token_refused=what == "token",
        ) from exc
