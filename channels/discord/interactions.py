"""Slash commands' interactions waiting for their reply, kept for a while and not for good.

A reply finds its interaction by the message id the command was stored under. A stranger's
command is answered once and then never, so without a bound every command they send would
stay here. Discord takes a followup only within 15 minutes of its command: an interaction
older than that is of no use, and when too many wait the oldest goes first (its reply, if
one still comes, is sent as a plain message in the chat).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import discord

KEPT_S = 14 * 60.0  # under Discord's 15 minutes: a followup begun now still gets there
MAX_KEPT = 100  # far more than a few people's commands waiting for their turns at once


class PendingInteractions:
    def __init__(
        self,
        kept_s: float = KEPT_S,
        max_kept: int = MAX_KEPT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kept_s = kept_s
        self._max_kept = max_kept
        self._clock = clock
        self._waiting: dict[str, tuple[float, discord.Interaction]] = {}  # oldest first

    def __len__(self) -> int:
        return len(self._waiting)

    def put(self, message_id: str, interaction: discord.Interaction) -> None:
        self._waiting.pop(message_id, None)
        self._waiting[message_id] = (self._clock(), interaction)
        self._drop_old()
        while len(self._waiting) > self._max_kept:
            del self._waiting[next(iter(self._waiting))]

    def pop(self, message_id: str) -> discord.Interaction | None:
        """The interaction the reply to `message_id` answers, if it is still usable."""
        self._drop_old()
        kept = self._waiting.pop(message_id, None)
        return kept[1] if kept is not None else None

    def _drop_old(self) -> None:
        now = self._clock()
        while self._waiting:
            oldest = next(iter(self._waiting))
            if now - self._waiting[oldest][0] < self._kept_s:
                return
            del self._waiting[oldest]
