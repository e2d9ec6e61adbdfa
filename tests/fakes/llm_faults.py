"""Outages of the LLM double: for a time window every chat request fails, hangs or is cut off.

``FakeLLM.outage`` returns an ``Outage``, which the server thread consults per request and the
test thread reads or ends early, so its state is locked. Scripted replies are not consumed
while an outage answers; they resume after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Outage", "OutageMode"]

OutageMode = str  # "500" (any HTTP status), "hang" or "drop"


@dataclass
class Outage:
    """One outage window of a ``mode``:

    * a status such as ``"500"``, ``"503"`` or ``"429"``: an OpenAI-shaped error at once;
    * ``"hang"``: the request is read and never answered; when the window ends the
      connection is closed without a response (a black hole, then a reset);
    * ``"drop"``: the connection is closed at once without a response.
    """

    mode: OutageMode
    until: float  # time.monotonic() when the window closes
    received: int = 0  # chat requests this outage took
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(
        default_factory=list, repr=False
    )

    def __post_init__(self) -> None:
        if self.mode not in ("hang", "drop") and not (
            self.mode.isdigit() and 400 <= int(self.mode) <= 599
        ):
            raise ValueError(f"outage mode {self.mode!r}: an HTTP error status, hang or drop")

    @property
    def active(self) -> bool:
        with self._lock:
            return time.monotonic() < self.until

    @property
    def status(self) -> int | None:
        """The HTTP status answered, or None for hang and drop."""
        return int(self.mode) if self.mode.isdigit() else None

    def end(self) -> None:
        """End the outage now; hanging requests are cut off at once."""
        with self._lock:
            self.until = min(self.until, time.monotonic())
            waiters = list(self._waiters)
        for loop, ended in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing waits
                loop.call_soon_threadsafe(ended.set)

    def take(self) -> bool:
        """Count a request if the outage is on; whether it is."""
        with self._lock:
            if time.monotonic() >= self.until:
                return False
            self.received += 1
            return True

    async def wait_out(self) -> None:
        """Wait on the server loop (other requests go on) until the window is over."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            left = self.until - time.monotonic()
            self._waiters.append(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter[1].wait(), max(0.0, left))
        finally:
            with self._lock:
                self._waiters.remove(waiter)
