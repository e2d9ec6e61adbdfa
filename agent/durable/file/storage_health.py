"""StorageHealth: whether state.db can be written — a full disk is a state everyone asks
about, not an error every writer logs.

A write that fails for space (StateFull: SQLite's "database or disk is full"; ENOSPC) marks
the disk full, and so does free space under FULL_BELOW_BYTES seen before a message is taken (so the
first message does not have to fail first). While it is full, intake waits: a channel's
message is neither stored nor acknowledged, so the platform keeps it. The log says so once
a minute, and whoever listens (the daemon: a message to the owner, sent directly, since the
outbox needs disk) hears it once when it fills and once when it is back. A probe decides
when it is back — free space over RESUME_FREE_BYTES and one real write committed — and then
everything resumes by itself. Reads need no space and go on all along.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from agent.durable.file.state_errors import StateFull, translated

log = logging.getLogger(__name__)

FULL_BELOW_BYTES = 64 * 1024  # less free than this: full, before a write fails
RESUME_FREE_BYTES = 256 * 1024  # free again once this much is (and a write succeeds)
PROBE_EVERY_S = 2.0
LOG_EVERY_S = 60.0

Listener = Callable[[bool, str], Awaitable[None]]  # (full, what to tell the owner)

FULL_TEXT = (
    "I cannot store anything: the disk that holds my state.db is full ({reason}). I am not "
    "taking new messages until space is freed; they wait, and I answer them then."
)
BACK_TEXT = "Space is back on the disk: I am taking messages again and answering what waited."


def is_space_error(exc: BaseException) -> bool:
    """A failure because the disk (or the user's quota) is full, also when it is the cause
    of another exception."""
    seen: BaseException | None = exc
    for _ in range(4):  # an exception and what it was raised from
        if seen is None:
            return False
        if isinstance(seen, StateFull) or isinstance(translated(seen), StateFull):
            return True
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write on `folder`'s filesystem (root may use the blocks
    reserved for it); None when that cannot be asked."""
    try:
        found = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    blocks = found.f_bfree if os.geteuid() == 0 else found.f_bavail
    return blocks * found.f_frsize


def space_line(folder: Path) -> str | None:
    """What `agent doctor` says when the disk is too full for pinclaw to take messages, or
    None when there is room."""
    free = free_bytes(folder)
    if free is None or free >= RESUME_FREE_BYTES:
        return None
    return (
        f"{free // 1024} KiB free on the disk of {folder}: pinclaw takes no messages until "
        f"at least {RESUME_FREE_BYTES // 1024} KiB are free"
    )


class StorageHealth:
    """One per state.db. `probe`: one small real write (StateDB gives it)."""

    def __init__(
        self,
        folder: Path,
        *,
        probe: Callable[[], Awaitable[object]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        probe_every_s: float = PROBE_EVERY_S,
        log_every_s: float = LOG_EVERY_S,
    ) -> None:
        self.folder = folder
        self.probe = probe
        self.reason = ""
        self._clock = clock
        self._probe_every_s = probe_every_s
        self._log_every_s = log_every_s
        self._full_since: float | None = None
        self._logged_at = 0.0
        self._writable = asyncio.Event()
        self._writable.set()
        self._listeners: list[Listener] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def full(self) -> bool:
        return self._full_since is not None

    def listen(self, listener: Listener) -> None:
        """`listener(full, text)` when the disk fills and when it is back."""
        self._listeners.append(listener)

    def failed(self, exc: BaseException) -> bool:
        """A write failed: True (and the disk is now full) when it was for space."""
        if not is_space_error(exc):
            return False
        self._mark_full(str(exc) or type(exc).__name__)
        return True

    def check_space(self) -> bool:
        """Look at the free space now (one statvfs); False when the disk is full."""
        if not self.full:
            free = free_bytes(self.folder)
            if free is not None and free < FULL_BELOW_BYTES:
                self._mark_full(f"{free // 1024} KiB free")
        return not self.full

    async def admit(self) -> None:
        """Wait while the disk is full: a message waits here, unacknowledged, until it can
        be stored (a stopping channel cancels the wait)."""
        while not self.check_space():
            await self._writable.wait()

    async def writable(self) -> None:
        """Wait until writes can succeed again (at once when they can)."""
        await self._writable.wait()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _mark_full(self, reason: str) -> None:
        if self.full:
            return
        self._full_since = self._logged_at = self._clock()
        self.reason = reason
        self._writable.clear()
        where = self.folder
        log.warning(
            "state.db: the disk is full (%s): no messages taken until %s has room", reason, where
        )
        self._spawn(self._watch())
        self._tell(full=True, text=FULL_TEXT.format(reason=reason))

    def _mark_back(self) -> None:
        since = self._full_since or self._clock()
        self._full_since = None
        self.reason = ""
        self._writable.set()
        log.warning(
            "state.db: space is back after %.0f s; taking messages again", self._clock() - since
        )
        self._tell(full=False, text=BACK_TEXT)

    async def _watch(self) -> None:
        """While full: look for space every few seconds, say it is still full once a minute."""
        while self.full:
            await asyncio.sleep(self._probe_every_s)
            if await self._space_is_back():
                self._mark_back()
                return
            if self._clock() - self._logged_at >= self._log_every_s:
                self._logged_at = self._clock()
                since = self._clock() - (self._full_since or self._clock())
                log.warning(
                    "state.db: the disk is still full (for %.0f s): no messages taken", since
                )

    async def _space_is_back(self) -> bool:
        free = free_bytes(self.folder)
        if free is not None and free < RESUME_FREE_BYTES:
            return False
        if self.probe is None:
            return True
        try:
            await self.probe()
        except Exception as exc:  # still full, or another failure: not back yet
            if not is_space_error(exc):
                log.debug("state.db: the probe write failed: %s", exc)
            return False
        return True

    def _tell(self, *, full: bool, text: str) -> None:
        for listener in self._listeners:
            self._spawn(_quietly(listener(full, text)))

    def _spawn(self, work: Awaitable[None]) -> None:
        try:
            task = asyncio.ensure_future(work)
        except RuntimeError:  # no event loop runs: nobody to watch or tell
            if asyncio.iscoroutine(work):
                work.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _quietly(work: Awaitable[None]) -> None:
    try:
        await work
    except Exception as exc:
        log.warning("state.db: telling the owner about the disk failed: %s", exc)
