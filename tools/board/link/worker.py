"""The one thread a board's I/O runs on, so the event loop never waits on a port.

Every operation of a Board runs here, one at a time, under a deadline. A thread that wedges
in a driver (a port that stops answering mid-write) is abandoned with its link: the caller
hears a BoardError at once and the next operation gets a fresh thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Worker:
    """One board's thread: `run(fn)` within `limit_s`, else `on_wedged()` and a BoardError
    from `wedged_error()`; `shutdown()` lets the thread go."""

    def __init__(
        self,
        limit_s: float,
        on_wedged: Callable[[], None],
        wedged_error: Callable[[], Exception],
        name: str,
    ) -> None:
        self._limit_s = limit_s
        self._on_wedged = on_wedged
        self._wedged_error = wedged_error
        self._name = name
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the thread; if it wedges, abandon the thread (and, through
        `on_wedged`, the link)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._name)
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
            # cancellation that lands as the call completes, and a cancelled pattern then
            # ran on forever, holding close() (seen as a hang under load).
            async with asyncio.timeout(self._limit_s):
                return await future
        except TimeoutError:
            self.shutdown()
            self._on_wedged()
            raise self._wedged_error() from None

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


def to_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """From the reader thread to the event loop; nothing once the loop is gone."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)
