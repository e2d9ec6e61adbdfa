"""TurnSlots: the `max_concurrent_turns` slots every channel's turns share, and the turns
that wait for a person.

A turn holds a slot while it works: its model calls and its tools. While it waits for a
person's answer to an approval question it holds none (`Slot.asking`): a few people who never
press a button must not stall every other chat for the question's whole timeout (issue 40's
soak: 16 unanswered questions held all 16 slots). The answer in, the turn takes a slot again
before its tool runs. `asking` counts the questions waiting, for /status and `agent doctor`.
The jobs' slots (`agent.max_jobs`, jobs/delegate_tool.py's JobDesk) are held the same way.

`quiet()` is the reload's "between turns" (agent/daemon/reloaded_app.py): no turn starts and
every admitted turn, also one parked on a question, has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable


class Slot:
    """One turn's place: held while it works, given back while it waits for a person."""

    def __init__(self, slots: TurnSlots) -> None:
        self._slots = slots
        self.held = False
        self._parked = 0  # questions of this turn waiting at once (parallel tool calls)
        self.asked = False  # it asked a person something (their answer is no model's delay)
        self.on_asking: Callable[[], None] | None = None  # told as a wait `aside` begins

    @contextlib.asynccontextmanager
    async def asking(self, aside: bool = False) -> AsyncIterator[None]:
        """Wait for a person without the slot; take one again before going on. A turn
        stopped meanwhile (/stop, a newer message, shutdown) goes on to nothing: it ends
        without waiting for a slot, which could take as long as the other turns' work.
        `aside`: the person is not the chat's own, and `on_asking` is told."""
        slots = self._slots
        self._parked += 1
        self.asked = True
        slots.asking += 1
        if aside and self.on_asking is not None:
            self.on_asking()
        if self.held and self._parked == 1:
            self.held = False
            slots.semaphore.release()
        stopped = False
        try:
            yield
        except asyncio.CancelledError:
            stopped = True
            raise
        finally:
            slots.asking -= 1
            self._parked -= 1
            if self._parked == 0 and not self.held and not stopped:
                await slots.semaphore.acquire()
                self.held = True


class TurnSlots:
    def __init__(self, count: int) -> None:
        self.count = count
        self.semaphore = asyncio.Semaphore(count)
        self.asking = 0  # approval questions waiting for a person, on every channel
        self.claimed = 0  # chats this process took from the shared store, answered or about to
        self._admitted = 0  # turns between hold()'s start and end, parked ones too
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Condition()

    def room(self) -> bool:
        """Whether to take one more chat from a store shared with other processes: fewer
        taken than slots, a chat whose turn waits for a person not counted."""
        return self.claimed - self.asking < self.count

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[Slot]:
        """A slot for one turn, for as long as the block runs (less its `asking` waits)."""
        await self._open.wait()
        self._admitted += 1
        slot = Slot(self)
        try:
            await self.semaphore.acquire()
            slot.held = True
            yield slot
        finally:
            if slot.held:
                self.semaphore.release()
            self._admitted -= 1
            async with self._idle:
                self._idle.notify_all()

    @contextlib.asynccontextmanager
    async def quiet(self) -> AsyncIterator[None]:
        """No turn running nor waiting for a person, and none starts until the block ends."""
        self._open.clear()
        try:
            async with self._idle:
                await self._idle.wait_for(lambda: self._admitted == 0)
            yield
        finally:
            self._open.set()
