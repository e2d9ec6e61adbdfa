"""When no model answers a message: the person is told once, at the first failed or hung
call (not at the turn's deadline), and the message waits and runs again with backoff until
`agent.retry_failed_turns_for_s`. A turn nobody typed (a schedule, a watch) tells nobody."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from agent.config import AgentSettings
from agent.durable.inbox import Inbox, Pending
from channels.base import ChatRef, Reply

log = logging.getLogger(__name__)

MAX_RETRY_WAIT_S = 60.0
OUTAGE_NOTICE = (
    "The model is unreachable right now. Your message is kept: I'll answer when it's back."
)


class OutageNotice:
    """Says OUTAGE_NOTICE to a pending message's chat at most once, however often it is
    called; `told` also counts a notice an earlier attempt of the message gave."""

    def __init__(
        self, pending: Pending, queue_reply: Callable[[ChatRef, Reply], Awaitable[int]]
    ) -> None:
        self._chat = pending.message.chat
        self._queue_reply = queue_reply
        self.told = pending.notified or pending.trigger is not None

    async def __call__(self, reason: str = "") -> None:
        if not self.told:
            self.told = True
            await self._queue_reply(self._chat, Reply(OUTAGE_NOTICE))


def retry_wait_s(agent: AgentSettings, attempts: int) -> float:
    """How long a message no model answered waits before its next attempt."""
    return min(agent.turn_retry_backoff_s * 2.0**attempts, MAX_RETRY_WAIT_S)


async def retry_later(
    pending: Pending, notice: OutageNotice, agent: AgentSettings, inbox: Inbox
) -> bool:
    """Schedule another attempt while the retry window lasts (the user told once); False
    when the window is over."""
    now = time.time()
    since = pending.failing_since or now
    if now - since >= agent.retry_failed_turns_for_s:
        return False
    await notice()
    wait = retry_wait_s(agent, pending.attempts)
    await inbox.defer(pending.id, retry_at=now + wait, failing_since=since, notified=True)
    log.warning("%s: no model answered; trying again in %.0f s", pending.message.chat.key, wait)
    return True
