"""What a failed Discord send means for the outbox: one row per error Discord's API (and
discord.py, which raises it) documents, each read as "retry" (not sent: try again),
"refused" (not sent, and trying again cannot help), "token" (not sent: the bot's token was
refused; it waits for the channel's next token) or "unknown" (it may have been created).

No Discord error means "sent": a resend of a message that did arrive carries the same
nonce, and Discord answers it with the first message (200), not an error. An "unknown"
part is sent again by the courier within the nonce window (Discord drops the copy), and
given up on after it (agent/runtime/queues/courier.py).
"""

from __future__ import annotations

from typing import Literal

import aiohttp
import discord

from channels.base import SendFailed

Meaning = Literal["retry", "refused", "token", "unknown"]


def meaning(exc: BaseException) -> Meaning | None:
    """The table: the first row that takes `exc` (subclasses before their bases); None for
    an exception that is not a platform's answer or a transport's failure."""
    if isinstance(exc, discord.LoginFailure):
        # login() refused: GET /users/@me answered 401. The token is not valid.
        return "token"
    if isinstance(exc, discord.RateLimited):
        # A 429 longer than the client's max_ratelimit_timeout (discord.py waits shorter
        # ones out itself and sends again): Discord did not take it; retry_after says when.
        return "retry"
    if isinstance(exc, discord.Forbidden):
        # 403: Missing Access, Missing Permissions, Cannot send messages to this user
        # (50007: the user closed DMs or blocked the bot). Not created; would be refused again.
        return "refused"
    if isinstance(exc, discord.NotFound):
        # 404: Unknown Channel (10003), Unknown Message: the place is gone. Not created.
        return "refused"
    if isinstance(exc, discord.DiscordServerError):
        # 5xx, after discord.py's own retries of 500, 502, 504 and 524 (a 503 at once):
        # Discord documents no outcome for these, so the message may exist.
        return "unknown"
    if isinstance(exc, discord.HTTPException):
        if exc.status == 401:
            # 401 Unauthorized: the token was reset in the developer portal. Nothing was
            # created, and this token never will: the part waits for the next token.
            return "token"
        if exc.status == 429:
            # A 429 discord.py did not wait out: Cloudflare's block (no retry_after in the
            # body, no Via header). Not taken; try again later.
            return "retry"
        if 400 <= exc.status < 500:
            # 400 Invalid Form Body (50035), 413 too large...: Discord checked the request
            # and created nothing.
            return "refused"
        return "unknown"  # an answer of no documented kind
    if isinstance(exc, aiohttp.ClientConnectorError):
        # No connection was made (refused, no route, DNS): Discord never had the request.
        return "retry"
    if isinstance(exc, (TimeoutError, aiohttp.ClientError, OSError)):
        # A timeout, a connection dropped or reset after the request was written: no
        # answer came, and the message may have been created.
        return "unknown"
    return None


def send_failed(exc: BaseException) -> SendFailed | None:
    """`exc` said in the outbox's terms; None when the table has no row for it."""
    what = meaning(exc)
    if what is None:
        return None
    reason = str(exc) if isinstance(exc, discord.HTTPException) else f"{type(exc).__name__}: {exc}"
    wait = exc.retry_after if isinstance(exc, discord.RateLimited) else None
    return SendFailed(
        reason,
        retry_after=wait,
        permanent=what == "refused",
        maybe_sent=what == "unknown",
        token_refused=what == "token",
    )
