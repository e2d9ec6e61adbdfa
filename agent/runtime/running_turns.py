"""The turns a channel is running, by chat, and each chat's last finished turn: what /stop
cancels (and a newer message interrupts) and /status reports, kept apart so commands need
not reach into turn answering. When processes share the store, a /stop or an interrupting
message taken by one process reaches the turn running in another as an announcement
(`heard`: STOP, FORGET, INTERRUPT). A turn whose question waits on someone else is set aside
(queues/busy.py's Answering): no longer the chat's running turn, which a newer message may
interrupt, but still stopped by /stop and /new."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

from agent.model.responses import Message
from agent.turns.turn import TurnOutcome
from agent.turns.turn_record import TurnRecord

TURNS = "turns"  # the claim on a chat's turns (agent/runtime/queues/chat_queues.py)
STOP = "stop"  # announced: stop the chat's turn, wherever it runs
FORGET = "forget"  # announced by /new: stop it, and store nothing of it
INTERRUPT = "interrupt"  # announced: a newer message interrupts it


Turn = asyncio.Task[TurnOutcome]
T = TypeVar("T")


class RunningTurns:
    def __init__(self) -> None:
        self.running: dict[str, Turn] = {}  # by chat key: the turn that holds its queue
        self.aside: dict[str, set[Turn]] = {}  # by chat key: turns set aside, waiting
        self.last: dict[str, TurnRecord] = {}  # by chat key
        self._interrupted: set[Turn] = set()  # stopped by a newer message: run again with it
        self._typed: set[Turn] = set()  # turns that answer a person (no trigger)
        self._forgotten: set[Turn] = set()  # stopped by /new: nothing of the turn is stored
        # By chat key: a turn getting ready (`preparing`); once /stop or /new asks, whether
        # it keeps the person's message (/stop) or nothing (/new).
        self._preparing: dict[str, bool | None] = {}
        self._steps: dict[str, asyncio.Future[Any]] = {}  # by chat key: `unless_stopped`'s

    @contextlib.contextmanager
    def preparing(self, chat_key: str) -> Iterator[None]:
        """While the chat's next turn gets ready (its files fetched, a turn slot waited
        for: seconds, or a slow upload's minutes), a /stop or /new is kept for it, and it
        ends as stopped when it starts, the model never called."""
        self._preparing[chat_key] = None
        try:
            yield
        finally:
            self._preparing.pop(chat_key, None)

    async def unless_stopped(self, chat_key: str, step: Awaitable[T], otherwise: T) -> T:
        """A step of a turn getting ready (its files fetched), cut short by a /stop or /new
        that comes meanwhile: then `otherwise`, and the turn ends stopped as it starts."""
        task = asyncio.ensure_future(step)
        self._steps[chat_key] = task
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                task.cancel()  # we were cancelled (shutdown): stop the step too
                raise
            return otherwise
        finally:
            if self._steps.get(chat_key) is task:
                del self._steps[chat_key]

    async def run(
        self,
        chat_key: str,
        turn: Coroutine[Any, Any, TurnOutcome],
        *,
        typed: bool,
        asked: Message,
        waiting: asyncio.Event | None = None,
    ) -> TurnOutcome:
        """The chat's turn run as the task /stop, /new and a newer message cancel — from its
        start, the history it reads (and may summarise, a model call) included. A shutdown
        cancels it too, and escapes: nothing is stored. Stopped, it keeps `asked` (the
        person's message), or nothing after /new; interrupted, nothing: it runs again.
        `waiting` set: it is set aside."""
        stop = self._preparing.pop(chat_key, None)  # asked while it got ready
        if stop is not None:
            turn.close()
            return TurnOutcome("done", "Stopped.", [asked] if stop else [], TurnRecord("cancelled"))
        task = asyncio.create_task(turn)
        self.running[chat_key] = task
        if typed:
            self._typed.add(task)
        watch = asyncio.create_task(self._set_aside(chat_key, task, waiting)) if waiting else None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                task.cancel()  # we were cancelled (shutdown): stop the turn too
                raise
            if task in self._interrupted:  # a newer message: nothing of it is kept
                return TurnOutcome("interrupted", "", [], TurnRecord("cancelled"))
            kept = [] if task in self._forgotten else [asked]
            return TurnOutcome("done", "Stopped.", kept, TurnRecord("cancelled"))
        finally:
            if watch is not None:
                watch.cancel()
            if self.running.get(chat_key) is task:
                del self.running[chat_key]
            if task in (aside := self.aside.get(chat_key, set())):
                aside.discard(task)
                if not aside:
                    del self.aside[chat_key]
            for marks in (self._interrupted, self._typed, self._forgotten):
                marks.discard(task)

    async def _set_aside(self, chat_key: str, task: Turn, waiting: asyncio.Event) -> None:
        await waiting.wait()
        if self.running.get(chat_key) is task:
            del self.running[chat_key]
        self.aside.setdefault(chat_key, set()).add(task)

    def heard(self, kind: str, chat_key: str) -> None:
        """Another process's announcement about a chat whose turn may run here."""
        if kind == STOP:
            self.cancel(chat_key)
        elif kind == FORGET:
            self.forget(chat_key)
        elif kind == INTERRUPT:
            self.interrupt(chat_key)

    def cancel(self, chat_key: str, *, keep: bool = True) -> bool:
        """Stop the chat's turns, the running one, those set aside and one getting ready;
        False when none runs. `keep` False: the one getting ready stores nothing (/new)."""
        turns = [t for t in self._of(chat_key) if not t.done()]
        for task in turns:
            task.cancel()
        getting_ready = chat_key in self._preparing
        if getting_ready and self._preparing[chat_key] is not False:  # /new outweighs /stop
            self._preparing[chat_key] = keep
        if getting_ready and (step := self._steps.get(chat_key)) is not None:
            step.cancel()  # a download of a message whose turn will not run
        return bool(turns) or getting_ready

    def forget(self, chat_key: str) -> bool:
        """Stop the chat's turns so that nothing of them is stored (/new: it would open the
        fresh conversation); False when none runs."""
        self._forgotten.update(self._of(chat_key))  # each one's own `finally` clears its mark
        return self.cancel(chat_key, keep=False)

    def interrupt(self, chat_key: str) -> bool:
        """Stop the chat's running turn so that its messages run again with a newer one (a
        schedule's or the heartbeat's turn is left to finish: it would only run again)."""
        task = self.running.get(chat_key)
        if task is None or task not in self._typed or task.done():
            return False
        task.cancel()
        self._interrupted.add(task)
        return True

    def _of(self, chat_key: str) -> list[Turn]:
        running = self.running.get(chat_key)
        return [*([running] if running else []), *self.aside.get(chat_key, ())]
