"""Background tasks: the one way pinclaw cancels a task it started and waits for it, and the
one way it finishes work whose effect may already have landed when the caller is cut off.

Written out by hand (`task.cancel()`, then `await task` inside `suppress(CancelledError)`),
the wait also swallows a cancellation aimed at the caller itself, so a shutdown that
cancels the stopper would go on as if nothing happened; and a task that had failed raises
its error out of the stop. Here the caller's own cancellation still propagates, and a
task's failure is logged, not raised: stopping never fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


async def stop_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel each task (None and finished ones are skipped) and wait until all have ended."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)
    for task in running:
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s ended with an error: %r", task.get_name(), task.exception())


async def despite_a_cut(work: Awaitable[T]) -> T:
    """Run `work` to its end even when the caller is cut off (/stop, an interrupting
    message, the turn's deadline, the tool's time limit, a shutdown), then let the cut go
    on: a write that may have landed keeps its bookkeeping (a file's file_sources record, a
    pin's log line and max_on_s deadline, a job row's task)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # seen: the caller hears of the cut, not of this
        raise
