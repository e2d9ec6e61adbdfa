"""Stopping background tasks: the one way pinclaw cancels a task it started and waits for it.

Written out by hand (`task.cancel()`, then `await task` inside `suppress(CancelledError)`),
the wait also swallows a cancellation aimed at the caller itself, so a shutdown that
cancels the stopper would go on as if nothing happened; and a task that had failed raises
its error out of the stop. Here the caller's own cancellation still propagates, and a
task's failure is logged, not raised: stopping never fails.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

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
