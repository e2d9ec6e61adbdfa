"""Telegram's webhook mode: at start `setWebhook` with the public URL and a secret made for
this run (Telegram sends it back in X-Telegram-Bot-Api-Secret-Token with every update, so a
request without it is not Telegram's), at stop `deleteWebhook` (updates then wait at Telegram
for the next start). An update is answered 200 only once it is handled (the message stored):
a failure answers 500 and Telegram sends it again later; one that cannot be read is skipped
(200), as polling skips it.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping

from telegram import Bot, Update

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookIntake:
    def __init__(self, bot: Bot, handle: Callable[[Update], Awaitable[None]]) -> None:
        self._bot, self._handle = bot, handle
        self._secret = ""  # set while the webhook is: no update is taken before or after

    @property
    def open(self) -> bool:
        return bool(self._secret)

    async def start(self, url: str, allowed_updates: list[str]) -> None:
        secret = secrets.token_urlsafe(32)
        await self._bot.set_webhook(url, allowed_updates=allowed_updates, secret_token=secret)
        self._secret = secret

    async def stop(self) -> None:
        """No more updates taken; Telegram keeps the next ones until the next start."""
        if self._secret:
            self._secret = ""
            await self._bot.delete_webhook()

    async def receive(self, headers: Mapping[str, str], body: bytes) -> int:
        given = headers.get(SECRET_HEADER, "")
        if not self._secret:
            log.warning("telegram: a webhook update while intake is stopped; not taken (503)")
            return 503
        # as bytes: aiohttp decodes a header with surrogateescape, and a token that is not
        # UTF-8 (surrogates) would make a plain encode() raise: a 500, not a 401
        given_bytes = given.encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given_bytes, self._secret.encode()):
            log.warning("telegram: a webhook request without this run's secret token (401)")
            return 401
        try:
            update = Update.de_json(json.loads(body), self._bot)
        except Exception as exc:
            log.warning("telegram: a webhook update could not be read and is skipped: %s", exc)
            return 200
        try:
            await self._handle(update)
        except Exception:
            log.exception(
                "telegram: update %s not taken; Telegram sends it again", update.update_id
            )
            return 500
        return 200
