"""A reply shown while the model writes it: one message, edited at a limited rate.

The platforms differ only in how the message is first sent, edited and finished; the
pacing (never more than one update per interval, the latest text wins) is shared here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod

from channels.base import OutgoingPart

log = logging.getLogger(__name__)


class PacedStream(ABC):
    def __init__(self, *, interval_s: float, max_chars: int) -> None:
        self._interval_s = interval_s
        self._max_chars = max_chars
        self._text = ""
        self._last_update = 0.0
        self._pending: asyncio.Task[None] | None = None
        self._finishing = asyncio.Event()

    def push(self, delta: str) -> None:
        self._text += delta
        if self._pending is None or self._pending.done():
            self._pending = asyncio.create_task(self._update())

    async def _update(self) -> None:
        """Show the latest text at the paced rate until the preview has caught up with it:
        text that arrived while an update was on its way is shown by the next one."""
        shown = None
        while shown != self._text:
            wait = max(0.0, self._last_update + self._interval_s - time.monotonic())
            try:
                await asyncio.wait_for(self._finishing.wait(), wait)
                return  # finishing: the final text follows at once
            except TimeoutError:
                pass
            self._last_update = time.monotonic()
            shown = self._text
            try:
                await self.show(shown[: self._max_chars])
            except Exception as exc:  # a skipped update is harmless: the final text follows
                log.debug("stream update skipped: %s", exc)

    async def finish(self, first: OutgoingPart) -> bool:
        """Replace the preview with the reply's first part; False when nothing was shown
        (the part is then sent as a new message). An update on its way lands first."""
        self._finishing.set()
        if self._pending is not None:
            await self._pending
        return await self.replace(first)

    @abstractmethod
    async def show(self, text: str) -> None:
        """Send the message with `text`, or edit it to `text` once it exists."""

    @abstractmethod
    async def replace(self, first: OutgoingPart) -> bool:
        """Replace the streamed text with the reply's first part, formatted; False when
        no message was shown yet."""
