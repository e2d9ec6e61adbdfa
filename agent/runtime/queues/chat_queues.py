"""ChatQueues: the chats' queues of one channel runtime, which never stop.

Each chat's pending messages are answered one at a time, oldest first, by its own
`KeyedWorker` task (a turn may answer several: a burst, or what the chat's busy mode folds
in, busy.py); a failure (state.db locked, the disk full) is tried again with backoff.
A finished turn whose commit failed stays in memory and is committed first when the worker
tries again: the turn, its tools and its model calls do not run a second time (after a crash
the message is still pending, and the turn runs again). A sweep wakes every chat with pending
work (inbox or outbox) at least once a minute, so a missed wake never leaves a chat waiting.

When other processes share the store (PostgreSQL), a chat's turns are answered by the one
process that claims it (`Store.claims`, "turns"): a process claims a chat only while it has a
free turn slot, so the chats spread over the processes with room; a stored message is
announced to all of them; and the sweep runs every second, so a chat let go just as a message
came is taken up within one. A commit that finds its message answered already (its claim was
lost with the claims connection) is dropped whole (AnsweredElsewhere).

A turn whose question waits on someone else is set aside (busy.py's Answering): the worker
goes on with the chat's next rows while it waits, and commits it when it ends. The
worker ends (and gives back its claim) only once every turn it set aside has ended.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent.durable.file.state_db import StateDB, Transaction
from agent.durable.inbox import AnsweredElsewhere, Inbox
from agent.durable.store import Claims, OneProcess
from agent.runtime.queues.busy import Answering, BusyModes
from agent.runtime.queues.courier import Courier
from agent.runtime.queues.keyed_worker import KeyedWorker
from agent.runtime.queues.turn_slots import TurnSlots
from agent.runtime.running_turns import TURNS
from channels.base import ChatRef, ReplyStream

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 30.0  # every chat with pending work is woken at least this often
SHARED_SWEEP_EVERY_S = 1.0  # the same, when other processes share the store


@dataclass(frozen=True)
class Finished:
    """A turn's outcome as one transaction: the session, the inbox, the outbox row's id."""

    chat: ChatRef
    commit: Callable[[Transaction], int | None]
    stream: ReplyStream | None = None  # the preview its reply replaces
    committed: Callable[[], None] | None = None  # told once it is stored (its reactions)


class ChatQueues:
    def __init__(
        self,
        channel: str,
        db: StateDB,
        inbox: Inbox,
        busy: BusyModes,
        courier: Courier,
        answer: Callable[[Answering], Awaitable[Finished | None]],
        *,
        claims: Claims | None = None,
        slots: TurnSlots | None = None,
    ) -> None:
        """`claims`: the store's, when other processes share it; `slots`: the turn slots,
        which say whether this process has room for one more chat."""
        self._channel = channel
        self._claims = claims or OneProcess()
        self._slots = slots or TurnSlots(1)
        self._claims.hear(self._heard)
        self._telling: set[asyncio.Task[None]] = set()  # announcements under way
        self._no_room: set[str] = set()  # chats not taken for want of a turn slot
        self._db = db
        self._inbox = inbox
        self._busy = busy
        self._courier = courier
        self._answer = answer  # runs the turn; None: it waits to run again (no model answered)
        self._workers = KeyedWorker(self._work, what="the chat's queue", health=db.health)
        self._unsaved: dict[str, Finished] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self.closing = False

    async def resume(self) -> None:
        """Run what an earlier run left (pending messages, then queued replies), and sweep
        from now on."""
        await self._wake_waiting()
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep(), name=f"{self._channel} sweep")

    def wake(self, chat_key: str) -> None:
        """Something is pending for the chat. Alone on the store, this process looks; shared,
        every process hears of it at once, this one too, so the one with room and time to
        spare takes it (a wake here first would hand the intake's holder nearly every turn
        of a burst: bench/several_processes.py)."""
        if self.closing:
            return
        if not self._claims.shared:
            self._workers.wake(chat_key)
            return
        task = asyncio.create_task(self._announce(chat_key), name=f"tell {chat_key}")
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def commit(self, finished: Finished) -> None:
        """Store a finished turn in one transaction and hand its reply to the courier; when
        the write fails, the turn is kept here until the chat's worker writes it."""
        key = finished.chat.key
        self._unsaved[key] = finished
        try:
            outgoing = await self._db.write(finished.commit)
        except AnsweredElsewhere as exc:
            del self._unsaved[key]
            log.warning("%s: %s; this turn's reply is dropped", key, exc)
            if finished.stream is not None:
                await finished.stream.discard()
            return
        del self._unsaved[key]
        if finished.committed is not None:
            finished.committed()
        if finished.stream is not None and outgoing is not None:
            self._courier.streams[outgoing] = finished.stream
        self._courier.wake(key)

    async def drain(self, grace_s: float) -> None:
        """Start no turn; let running ones finish within `grace_s`, then cancel them."""
        self.closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        await self._workers.drain(grace_s)

    async def _work(self, chat_key: str) -> None:
        """The chat's pending messages, oldest first, until none is left — when this process
        may answer the chat (always, alone on the store)."""
        claims, slots = self._claims, self._slots
        if not claims.shared:
            await self._answer_all(chat_key)
            return
        if not slots.room():
            self._no_room.add(chat_key)  # the others have room, or one is let go here
            return
        slots.claimed += 1  # counted before the claim's round trip: a burst takes no more
        try:
            if not await claims.take(TURNS, chat_key):
                return  # another process answers it
            try:
                await self._answer_all(chat_key)
            finally:
                await claims.give_back(TURNS, chat_key)
        finally:
            slots.claimed -= 1
            if self._no_room and not self.closing:  # room again: one that found none
                self._workers.wake(self._no_room.pop())

    async def _answer_all(self, chat_key: str) -> None:
        unsaved = self._unsaved.get(chat_key)
        if unsaved is not None:
            await self.commit(unsaved)
        aside: dict[asyncio.Task[None], Answering] = {}  # turns waiting for a person
        try:
            await self._answer_rows(chat_key, aside)
            await asyncio.gather(*aside)  # their failure is the worker's, tried again
        except BaseException:
            for task in aside:
                task.cancel()  # a shutdown, or the worker failing: they run again later
            await asyncio.gather(*aside, return_exceptions=True)
            raise

    async def _answer_rows(self, chat_key: str, aside: dict[asyncio.Task[None], Answering]) -> None:
        """The chat's rows, a turn at a time; a turn set aside goes on in `aside`."""
        while not self.closing:
            self._workers.settle(chat_key)
            for task in [task for task in aside if task.done()]:
                del aside[task]
                task.result()  # raised: the worker tries again
            skip = frozenset(row for turn in aside.values() for row in turn.rows)
            pending, burst_s = await self._busy.next_turn(chat_key, skip)
            if pending is None:
                if not aside:
                    return
                await self._woken_or_done(chat_key, aside, SWEEP_EVERY_S)
                continue
            wait = max(burst_s, pending.next_attempt_at - time.time())
            if wait > 0 and self._claims.shared and not aside:  # not due: let go (a chat
                asyncio.get_running_loop().call_later(wait, self._workers.wake, chat_key)
                return  # that waits for its model holds no room here) and look when it is
            if wait > 0 and aside:
                await self._woken_or_done(chat_key, aside, wait)
                continue
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            turn = Answering(pending)
            task = asyncio.create_task(self._answered(turn), name=f"turn {chat_key}")
            set_aside = asyncio.create_task(turn.waiting.wait())
            try:
                await asyncio.wait({task, set_aside}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                task.cancel()
                raise
            finally:
                set_aside.cancel()
            if task.done():
                task.result()
            else:
                aside[task] = turn

    async def _woken_or_done(
        self, chat_key: str, aside: dict[asyncio.Task[None], Answering], timeout_s: float
    ) -> None:
        """Until the chat's next wake (a message), a turn set aside ends, or `timeout_s`."""
        woken = asyncio.create_task(self._workers.woken(chat_key).wait())
        try:
            await asyncio.wait(
                {woken, *aside}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            woken.cancel()

    async def _answered(self, turn: Answering) -> None:
        finished = await self._answer(turn)
        if finished is not None:
            await self.commit(finished)

    async def _wake_waiting(self) -> None:
        for chat_key in await self._inbox.chats_waiting(self._channel):
            if not self.closing:
                self._workers.wake(chat_key)
        await self._courier.resume()

    def _heard(self, kind: str, chat_key: str) -> None:
        """A message was stored for a chat of this channel (by any process, this one too)."""
        if kind == TURNS and chat_key.startswith(f"{self._channel}:") and not self.closing:
            self._workers.wake(chat_key)

    async def _announce(self, chat_key: str) -> None:
        try:
            await self._claims.announce(TURNS, chat_key)
        except Exception as exc:  # this one looks; the others find it at their next sweep
            log.warning("%s: could not tell the other processes: %s", chat_key, exc)
            self._workers.wake(chat_key)

    async def _sweep(self) -> None:
        every_s = SHARED_SWEEP_EVERY_S if self._claims.shared else SWEEP_EVERY_S
        while True:
            await asyncio.sleep(every_s)
            try:
                await self._wake_waiting()
            except Exception as exc:  # state.db unreadable for now: next time
                log.warning("%s: the sweep could not read state.db: %s", self._channel, exc)
