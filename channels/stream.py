"""A reply shown while the model writes it: one message, edited at a limited rate.

The platforms differ only in how the message is first sent, edited and finished; the
pacing (never more than one update per interval, the latest text wins), the draft message
and when it is sent rather than edited are shared here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from channels.base import ChatRef, OutgoingPart

log = logging.getLogger(__name__)

Draft = TypeVar("Draft")  # the platform's message object


class PacedStream(ABC, Generic[Draft]):
    """The draft of a reply to `reply_to` in `chat`, sent once and then edited."""

    def __init__(self, chat: ChatRef, reply_to: str, *, interval_s: float, max_chars: int) -> None:
        self._chat = chat
        self._reply_to = reply_to
        self._message: Draft | None = None  # the draft, once sent
        self._shown = ""  # the text it shows
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
                await self._show(shown[: self._max_chars])
            except Exception as exc:  # a skipped update is harmless: the final text follows
                log.debug("stream update skipped: %s", exc)

    async def finish(self, first: OutgoingPart) -> bool:
        """Replace the preview with the reply's first part; False when nothing was shown
        (the part is then sent as a new message). An update on its way lands first."""
        self._finishing.set()
        if self._pending is not None:
            await self._pending
        if self._message is None:
            return False
        await self.replace(self._message, first)
        return True

    async def discard(self) -> None:
        """Remove the preview: the turn gave up for now (no model answered) and its answer
        comes later as a message of its own, so a cut stream's text must not stay above it."""
        self._finishing.set()
        if self._pending is not None:
            await self._pending
        message, self._message = self._message, None
        if message is not None:
            await self.delete(message)

    async def _show(self, text: str) -> None:
        """Send the draft with `text`, or edit it to `text` once it exists."""
        if self._message is None:
            self._message = await self.send(text)
        elif text != self._shown:
            self._message = await self.edit(self._message, text)
        self._shown = text

    @abstractmethod
    async def send(self, text: str) -> Draft:
        """Send the draft, a reply to `self._reply_to`."""

    @abstractmethod
    async def edit(self, message: Draft, text: str) -> Draft:
        """The draft edited to `text`, as the platform returned it."""

    @abstractmethod
    async def delete(self, message: Draft) -> None:
        """Delete the draft."""

    @abstractmethod
    async def replace(self, message: Draft, first: OutgoingPart) -> None:
        """Replace the draft's text with the reply's first part, formatted."""
