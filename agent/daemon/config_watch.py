"""The file watch of a running daemon: config.toml and agent.env looked at once a second, and a
reload asked for when either changed (agent/daemon/reload.py).

A file's identity, size and modification time are compared (`os.stat`, nothing read): an edit
in place, an editor's save by rename, a file made or removed all show. An editor may write in
steps, so a change is acted on only once the files hold still for a moment; a half-written
file is not taken for a broken one. Polling costs a few `stat` calls a second and needs no
library (inotify is Linux's alone; the daemon runs on macOS too).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from tools.background import stop_tasks

log = logging.getLogger(__name__)

EVERY_S = 1.0
SETTLE_S = 0.3  # unchanged this long after a change: the write is done

Signature = tuple[tuple[int, int, int] | None, ...]


def signature(paths: Sequence[Path]) -> Signature:
    """Each file's (inode, size, mtime in ns), None where there is none."""
    found: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((info.st_ino, info.st_size, info.st_mtime_ns))
    return tuple(found)


class ConfigWatch:
    """Calls `changed()` after `paths` changed (and held still), one call at a time."""

    def __init__(
        self,
        paths: Sequence[Path],
        changed: Callable[[], Awaitable[object]],
        *,
        every_s: float = EVERY_S,
    ) -> None:
        self.paths = tuple(paths)
        self._changed = changed
        self._every_s = every_s
        self._seen = signature(self.paths)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="config watch")

    def seen(self) -> None:
        """The files as they are now were read (a reload asked some other way): a change
        from here on is a new one."""
        self._seen = signature(self.paths)

    async def stop(self) -> None:
        await stop_tasks(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)
            now = signature(self.paths)
            if now == self._seen:
                continue
            await asyncio.sleep(SETTLE_S)
            if signature(self.paths) != now:
                continue  # still being written: looked at again at the next tick
            self._seen = now
            log.info("%s changed: reading it again", " or ".join(p.name for p in self.paths))
            try:
                await self._changed()
            except Exception:  # a reload that failed inside: said, and the watch goes on
                log.exception("reloading the settings failed")
