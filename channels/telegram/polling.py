"""Long polling for Telegram, written out so pinclaw decides when an update is acknowledged.

Telegram forgets an update once getUpdates is called with an offset past it. PTB's Updater
moves the offset as soon as updates are fetched, before anyone has handled them, and parses
a batch as a whole: one update it cannot parse fails the batch, the offset never moves and
the same call repeats forever. Here each update is parsed on its own (one that fails is
logged once and skipped), handled (the message stored in the inbox), and only then is the
offset moved past it. A handler that fails leaves the offset where it is, so Telegram hands
the update again after a pause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, Update
from telegram.error import Forbidden, InvalidToken, NetworkError, RetryAfter

log = logging.getLogger(__name__)

MAX_PAUSE_S = 30.0


class UpdatePoller:
    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[None]],
        *,
        allowed_updates: list[str],
        timeout_s: int = 10,
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._allowed = allowed_updates
        self._timeout_s = timeout_s
        self.offset = 0

    async def run(self) -> None:
        pause = 0.5
        while True:
            try:
                batch = await self._fetch()
            except (InvalidToken, Forbidden) as exc:
                log.error("telegram: polling refused (%s); stopping intake", exc)
                return
            except RetryAfter as exc:
                await asyncio.sleep(retry_seconds(exc.retry_after))
                continue
            except NetworkError as exc:  # includes TimedOut and 5xx answers
                log.warning("telegram: polling error (%s); again in %.1f s", exc, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_PAUSE_S)
                continue
            pause = 0.5
            if not await self._take(batch):
                await asyncio.sleep(pause)

    async def _fetch(self) -> list[dict[str, Any]]:
        data = {"offset": self.offset, "timeout": self._timeout_s, "allowed_updates": self._allowed}
        # PTB's own transport (what Bot.get_updates calls), to get the raw updates.
        result = await self._bot._post("getUpdates", data, read_timeout=self._timeout_s + 10)
        return list(result or [])

    async def _take(self, batch: list[dict[str, Any]]) -> bool:
        """Handle the updates in order; False when one could not be handled (kept for the
        next call)."""
        for data in batch:
            update_id = int(data.get("update_id", self.offset))
            try:
                update = Update.de_json(data, self._bot)
            except Exception as exc:
                log.warning(
                    "telegram: update %d could not be read and is skipped: %s: %s",
                    update_id,
                    type(exc).__name__,
                    exc,
                )
                self.offset = update_id + 1
                continue
            try:
                await self._handle(update)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("telegram: update %d not taken; it will come again", update_id)
                return False
            self.offset = update_id + 1
        return True


def retry_seconds(wait: Any) -> float:
    """RetryAfter.retry_after in seconds: python-telegram-bot gives an int or a timedelta,
    depending on its version and settings; polling and sending both wait it out."""
    return float(wait.total_seconds()) if hasattr(wait, "total_seconds") else float(wait)
