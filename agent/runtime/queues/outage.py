"""What a person waiting is told while the model is slow or failing.

No model answers: the person is told once, when the failures have lasted
`agent.outage_notice_after_s` (a single 500 that the retry a second later fixes says
nothing), and the message waits and runs again with backoff until
`agent.retry_failed_turns_for_s`. A model that is only slow (a local one may think for
minutes by design) gets one "still thinking" line after `agent.still_thinking_after_s` with
nothing shown, instead of silence. A turn nobody typed (a schedule, a watch) tells nobody."""

from __future__ import annotations

import asyncio
import contextlib
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
STILL_THINKING = "Still thinking… the model is taking its time. The answer follows here."

QueueReply = Callable[[ChatRef, Reply], Awaitable[int]]


class Later:
    """One line said to a chat at most once, now or after a wait that can be called off."""

    def __init__(self, chat: ChatRef, queue_reply: QueueReply, text: str, *, told: bool) -> None:
        self._chat = chat
        self._queue_reply = queue_reply
        self._text = text
        self.told = told
        self._timer: asyncio.Task[None] | None = None
        self._landing = False  # the timer is queueing the line

    async def tell(self) -> None:
        if not self.told:
            self.told = True
            await self._queue_reply(self._chat, Reply(self._text))

    def tell_in(self, wait_s: float) -> None:
        """Tell after `wait_s` unless called off meanwhile (an earlier wait stands)."""
        if not self.told and self._timer is None:
            self._timer = asyncio.create_task(self._after(wait_s))

    async def _after(self, wait_s: float) -> None:
        await asyncio.sleep(wait_s)
        self._landing = True
        try:
            await self.tell()
        except Exception as exc:  # the store failed: the answer still comes, untold
            log.warning("%s: could not queue %r: %s", self._chat.key, self._text[:30], exc)

    async def call_off(self) -> None:
        """No line from here on (the turn ended); a line on its way is let land first, so
        it stays ahead of the answer."""
        timer, self._timer = self._timer, None
        if timer is None or timer.done():
            return
        if not self._landing:
            timer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timer


class StillThinking(Later):
    """STILL_THINKING once, when a person's turn has streamed nothing for `after_s` (0:
    never); `shown` is the turn's `on_text`, and its first text calls the line off, as does
    a question the turn asked a person (`asked`: they saw it, and the wait is theirs)."""

    def __init__(
        self,
        chat: ChatRef,
        queue_reply: QueueReply,
        after_s: float,
        on_text: Callable[[str], None] | None,
        *,
        asked: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(chat, queue_reply, STILL_THINKING, told=not after_s)
        self._on_text = on_text
        self._asked = asked
        self.tell_in(after_s)

    async def tell(self) -> None:
        if not self._asked():
            await super().tell()

    def shown(self, delta: str) -> None:
        self.told = True  # text is on the screen: nothing to say
        if self._on_text is not None:
            self._on_text(delta)


class OutageNotice(Later):
    """Says OUTAGE_NOTICE to a pending message's chat once its calls have failed for
    `after_s` (counted from the first failure, an earlier attempt's too); `told` also counts
    a notice an earlier attempt gave."""

    def __init__(self, pending: Pending, queue_reply: QueueReply, *, after_s: float) -> None:
        told = pending.notified or pending.trigger is not None
        super().__init__(pending.message.chat, queue_reply, OUTAGE_NOTICE, told=told)
        self.since = pending.failing_since  # wall time of the first failure, or None
        self._after_s = after_s

    async def __call__(self, reason: str = "") -> None:
        """A model call failed (and is retried): tell now if the failures have lasted, else
        when they will have, unless the turn ends first."""
        now = time.time()
        self.since = self.since or now
        wait = self.since + self._after_s - now
        if wait <= 0:
            await self.tell()
        else:
            self.tell_in(wait)

    def lasting_by(self, when: float) -> bool:
        """Whether the failures will have lasted `after_s` by the wall time `when`."""
        return self.since is not None and when - self.since >= self._after_s


def retry_wait_s(agent: AgentSettings, attempts: int) -> float:
    """How long a message no model answered waits before its next attempt."""
    return min(agent.turn_retry_backoff_s * 2.0**attempts, MAX_RETRY_WAIT_S)


async def retry_later(
    pending: Pending, notice: OutageNotice, agent: AgentSettings, inbox: Inbox
) -> bool:
    """Schedule another attempt while the retry window lasts; False when the window is
    over. The person is told now when the failures will have lasted past the notice's wait
    by the next attempt; else the next attempt tells when they do."""
    now = time.time()
    since = notice.since or pending.failing_since or now
    notice.since = since
    if now - since >= agent.retry_failed_turns_for_s:
        return False
    wait = retry_wait_s(agent, pending.attempts)
    if notice.lasting_by(now + wait):
        await notice.tell()
    await notice.call_off()
    await inbox.defer(pending.id, retry_at=now + wait, failing_since=since, notified=notice.told)
    log.warning("%s: no model answered; trying again in %.0f s", pending.message.chat.key, wait)
    return True
