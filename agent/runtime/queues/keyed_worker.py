"""KeyedWorker: one serial worker per key (a chat), shared by the chats' queues and the courier.

`wake(key)` says there is work for that key; one task per key runs `work(key)`, which does
everything pending and returns. A wake that comes while it runs is not lost: the task runs
`work(key)` again (the "again" flag; `settle(key)` clears it just before the work reads what
is pending, so a wake from then on is seen by that read and costs no extra round). Work that
waits on something else meanwhile can wait for the key's next wake too (`woken`).

An error never stops a key for good: the task waits (backoff doubling to a cap) and runs
`work(key)` again, until it returns normally. The state is in state.db, so running the work
again is how it resumes; what must not be redone (a send) is the work's own business: it keeps
the outcome in memory and writes it first (see delivery.py). The first error of a streak is
logged with its traceback, the next ones in one line at most once a minute. A write that
failed because the disk is full is no error of the work: StorageHealth says that once a
minute itself, and the worker waits until writes can succeed again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from agent.durable.file.storage_health import StorageHealth

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
QUIET_LOG_S = 60.0  # a failing key is logged again at most this often


class KeyedWorker:
    def __init__(
        self,
        work: Callable[[str], Awaitable[None]],
        *,
        what: str,
        backoff_s: float = 0.5,
        max_backoff_s: float = MAX_BACKOFF_S,
        health: StorageHealth | None = None,
    ) -> None:
        self._work = work
        self._health = health  # state.db's: a full disk is waited out, not logged as an error
        self._what = what  # for the log: "the chat's queue", "delivery"
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._woken: dict[str, asyncio.Event] = {}
        self.closing = False

    def wake(self, key: str) -> None:
        """There is (maybe) something to do for `key`; start its task unless it runs."""
        self._again.add(key)
        if (woken := self._woken.get(key)) is not None:
            woken.set()
        if key not in self._tasks and not self.closing:
            self._tasks[key] = asyncio.create_task(self._run(key), name=f"{self._what} {key}")

    def settle(self, key: str) -> None:
        """The work is about to read what is pending: a wake from here on is seen by it."""
        self._again.discard(key)
        self._woken.pop(key, None)

    def woken(self, key: str) -> asyncio.Event:
        """Set by the first wake of `key` since its work last settled (already, if one came)."""
        event = self._woken.setdefault(key, asyncio.Event())
        if key in self._again:
            event.set()
        return event

    @property
    def busy(self) -> bool:
        return any(not task.done() for task in self._tasks.values())

    async def drain(self, grace_s: float) -> None:
        """Start nothing new; let running work go on for `grace_s`, then cancel it (what is
        left is in state.db for the next start)."""
        self.closing = True
        running = [task for task in self._tasks.values() if not task.done()]
        if running:
            _, late = await asyncio.wait(running, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def _run(self, key: str) -> None:
        backoff, failures, told_at = self._backoff_s, 0, 0.0
        try:
            while not self.closing:
                self._again.discard(key)
                try:
                    await self._work(key)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if self._health is not None and self._health.failed(exc):
                        await self._health.writable()
                        continue
                    failures += 1
                    now = time.monotonic()
                    if failures == 1:
                        log.exception("%s: %s failed; trying again", key, self._what)
                        told_at = now
                    elif now - told_at >= QUIET_LOG_S:
                        why = f"{type(exc).__name__}: {exc}"
                        log.warning(
                            "%s: %s still failing (%d times): %s", key, self._what, failures, why
                        )
                        told_at = now
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff_s)
                    continue
                if failures:
                    log.warning("%s: %s goes on after %d failure(s)", key, self._what, failures)
                    backoff, failures = self._backoff_s, 0
                if key not in self._again:
                    return
        finally:
            self._tasks.pop(key, None)
