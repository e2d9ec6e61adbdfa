"""Reactions: the person sees that a message was taken, then how it went: 👀 when it is
stored, ✍️ when a turn works on it, ✅ or ❌ once that turn is committed (`[channels]
reactions`, four emoji, or [] for none). On a channel without reactions (channels.base
Reacting) a message that comes while its chat is busy gets a short line instead.

Best effort and off the turn's path: each message's reactions go out in order from a task
of their own; a platform that refuses one (an old message, no permission) costs a log line.
What stands on a message is forgotten once its last reaction was tried, and only the latest
SHOWN_KEPT messages' are kept: with several processes, the one that put 👀 never sees the end.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Iterable

from agent.runtime.turn_setup import TurnSetup
from channels.base import Channel, ChatRef, IncomingMessage, Reacting
from channels.registry import kind_named

log = logging.getLogger(__name__)

STAGES = ("taken", "working", "done", "failed")  # the order of [channels] reactions
SHOWN_KEPT = 1_000  # messages whose emoji is remembered, the least recently changed dropped
BUSY_LINES = {  # what a message says on a channel without reactions, by busy mode
    "queue": "Got it: I'll answer this once I've finished the answer I'm on.",
    "steer": "Got it: I'm taking this into the answer I'm working on.",
    "interrupt": "Got it: stopping, and I'll answer both together.",
    "collect": "Got it: I'll answer your messages together.",
}


class Reactions:
    def __init__(self, channel: Channel, setup: TurnSetup) -> None:
        self._channel = channel
        self._setup = setup
        # The emoji on each message now, the least recently changed first.
        self._shown: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._last: dict[tuple[str, str], asyncio.Task[None]] = {}  # its latest change

    @property
    def on(self) -> bool:
        return bool(self._setup.settings.channels.reactions)

    @property
    def says_busy(self) -> bool:
        """A chat channel (a registered kind, not the HTTP API's or the hooks') that cannot
        react: a message that comes while its chat is busy gets a line instead."""
        return (
            self.on
            and not isinstance(self._channel, Reacting)
            and bool(kind_named(self._channel.name))
        )

    def mark(self, messages: Iterable[IncomingMessage], stage: str) -> None:
        """Show `stage` on each message (a person's, with an id), in order, in the background."""
        emoji = self._setup.settings.channels.reactions
        if not emoji or not isinstance(self._channel, Reacting):
            return
        shown = emoji[STAGES.index(stage)]
        for msg in messages:
            if not msg.message_id:
                continue
            key = (msg.chat.key, msg.message_id)
            before = self._last.get(key)
            task = asyncio.create_task(self._react(self._channel, msg.chat, key, shown, before))
            self._last[key] = task
            final = STAGES.index(stage) >= STAGES.index("done")
            task.add_done_callback(functools.partial(self._forget, key, final))

    async def _react(
        self,
        channel: Reacting,
        chat: ChatRef,
        key: tuple[str, str],
        emoji: str,
        before: asyncio.Task[None] | None,
    ) -> None:
        if before is not None:
            await asyncio.gather(before, return_exceptions=True)
        previous = self._shown.get(key, "")
        if previous == emoji:
            return
        try:
            await channel.react(chat, key[1], emoji, previous)
        except Exception as exc:  # the platform's refusal: the message is answered all the same
            log.info("%s: no %s reaction on message %s: %s", chat.key, emoji, key[1], exc)
            return
        self._shown[key] = emoji
        self._shown.move_to_end(key)
        while len(self._shown) > SHOWN_KEPT:
            self._shown.popitem(last=False)

    def _forget(self, key: tuple[str, str], final: bool, done: asyncio.Task[None]) -> None:
        """After the last change asked for: a final one (✅ or ❌), shown or refused, ends
        the message's story here, so what stands on it is forgotten."""
        if self._last.get(key) is done:
            del self._last[key]
            if final:
                self._shown.pop(key, None)
