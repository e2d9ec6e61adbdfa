"""Enqueue: what the proactive side (schedules, the heartbeat, pin watches, the boards'
notices) may do with a chat channel — ask whether a person may still use it, queue a reply,
put a message nobody typed into its inbox — without knowing the runtime behind it
(ChannelRuntime answers it)."""

from __future__ import annotations

from typing import Protocol

from agent.durable.triggers import Trigger
from agent.runtime.queues.replies import Alongside
from channels.base import ChatRef, IncomingMessage, Reply


class Enqueue(Protocol):
    """What the proactive side (schedules, the heartbeat, pin watches, the boards' notices)
    and the daemon's `agent send` may do with a chat channel."""

    def is_allowed_sender(self, sender_id: str, username: str = "") -> bool: ...

    async def queue_reply(
        self, chat: ChatRef, reply: Reply, *, alongside: Alongside | None = None
    ) -> int: ...

    async def enqueue_triggered(
        self, msg: IncomingMessage, trigger: Trigger, *, alongside: Alongside
    ) -> bool: ...
